import { useId, useState, type FormEvent } from 'react';
import { api } from '../../api/client.js';
import type { components } from '../../api/generated/schema.js';
import { ItemBoundary } from '../../components/ErrorBoundary.js';
import { Markdown } from '../../components/Markdown.js';

export type Interaction = components['schemas']['Interaction'];
type Question = Interaction['questions'][number];
type AnswerMap = Extract<components['schemas']['AnswerRequest'], { action: 'answer' }>['answers'];

const OTHER = '\u0000other';

/**
 * A pending question or plan approval, answered once (POST /v1/interactions/{id}/answer). A 409
 * means another tab or client settled it first: said as "already answered". Either way `onSettled`
 * lets the page read the interactions again (`late`: the page keeps this form up, so what it says stays).
 */
export function InteractionForm({
  interaction,
  onSettled,
  onSignedOut,
}: {
  interaction: Interaction;
  onSettled: (late: boolean) => void;
  onSignedOut: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ tone: 'done' | 'alert'; text: string } | null>(null);
  const titleId = useId();

  async function answer(answers: AnswerMap) {
    setBusy(true);
    setOutcome(null);
    try {
      const { data, error, response } = await api.POST('/v1/interactions/{id}/answer', {
        params: { path: { id: interaction.id } },
        body: { action: 'answer', answers },
      });
      if (response.status === 401) return onSignedOut();
      if (data) {
        setOutcome({ tone: 'done', text: 'Answered.' });
        onSettled(false);
      } else if (response.status === 409) {
        setOutcome({
          tone: 'alert',
          text: 'Already answered, in another tab or by another client: that answer stands.',
        });
        onSettled(true);
      } else {
        setOutcome({ tone: 'alert', text: describeError(error, response.status) });
      }
    } catch (err) {
      setOutcome({ tone: 'alert', text: `The answer was not sent (${String(err)}). Try again.` });
    } finally {
      setBusy(false);
    }
  }

  const settled = outcome !== null && (outcome.tone === 'done' || outcome.text.startsWith('Already answered'));
  return (
    <section className="interaction-form" aria-labelledby={titleId} data-testid="interaction">
      <h3 id={titleId}>{interaction.kind === 'plan_approval' ? 'The agent proposes a plan' : 'The agent asks'}</h3>
      {interaction.kind === 'plan_approval' ? (
        <PlanApproval interaction={interaction} disabled={busy || settled} onAnswer={answer} />
      ) : (
        <Questions interaction={interaction} disabled={busy || settled} onAnswer={answer} />
      )}
      {outcome && (
        <p role={outcome.tone === 'alert' ? 'alert' : 'status'} className={outcome.tone}>
          {outcome.text}
        </p>
      )}
    </section>
  );
}

function Questions({
  interaction,
  disabled,
  onAnswer,
}: {
  interaction: Interaction;
  disabled: boolean;
  onAnswer: (answers: AnswerMap) => void;
}) {
  const [chosen, setChosen] = useState<Record<string, string>>({});
  const [texts, setTexts] = useState<Record<string, string>>({});
  const [missing, setMissing] = useState(false);

  function submit(event: FormEvent) {
    event.preventDefault();
    const answers: AnswerMap = {};
    for (const q of interaction.questions) {
      const choice = chosen[q.id];
      const text = (texts[q.id] ?? '').trim();
      if (choice !== undefined && choice !== OTHER) answers[q.id] = { kind: 'options', optionIds: [choice] };
      else if (text !== '' && (choice === OTHER || q.options.length === 0)) answers[q.id] = { kind: 'text', text };
    }
    if (Object.keys(answers).length === 0) return setMissing(true);
    setMissing(false);
    onAnswer(answers);
  }

  return (
    <form onSubmit={submit}>
      {interaction.questions.map((q) => (
        <QuestionField
          key={q.id}
          question={q}
          choice={chosen[q.id]}
          text={texts[q.id] ?? ''}
          disabled={disabled}
          onChoice={(value) => setChosen((c) => ({ ...c, [q.id]: value }))}
          onText={(value) => setTexts((t) => ({ ...t, [q.id]: value }))}
        />
      ))}
      {missing && <p role="alert">Answer at least one question.</p>}
      <button type="submit" disabled={disabled}>
        Send answer
      </button>
    </form>
  );
}

function QuestionField({
  question: q,
  choice,
  text,
  disabled,
  onChoice,
  onText,
}: {
  question: Question;
  choice: string | undefined;
  text: string;
  disabled: boolean;
  onChoice: (value: string) => void;
  onText: (value: string) => void;
}) {
  const textId = useId();
  const name = useId();
  // A secret is typed into a password field and never echoed back: answers come back redacted.
  const textInput = (label: string) => (
    <span className="other">
      <label htmlFor={textId}>{label}</label>
      <input
        id={textId}
        type={q.isSecret ? 'password' : 'text'}
        autoComplete="off"
        value={text}
        disabled={disabled}
        onChange={(e) => onText(e.target.value)}
        onFocus={() => q.options.length > 0 && onChoice(OTHER)}
      />
    </span>
  );
  return (
    <fieldset disabled={disabled}>
      <legend>
        {q.header && <strong>{q.header}: </strong>}
        {q.question}
      </legend>
      {q.options.map((option) => (
        <label key={option.label} className="option">
          <input
            type="radio"
            name={name}
            value={option.label}
            checked={choice === option.label}
            onChange={() => onChoice(option.label)}
          />
          <span>
            {option.label}
            {option.description && <small> — {option.description}</small>}
          </span>
        </label>
      ))}
      {q.options.length === 0 ? (
        textInput(q.isSecret ? 'Secret answer' : 'Your answer')
      ) : q.isOther ? (
        <>
          <label className="option">
            <input type="radio" name={name} checked={choice === OTHER} onChange={() => onChoice(OTHER)} />
            <span>Other</span>
          </label>
          {choice === OTHER && textInput('Other answer')}
        </>
      ) : null}
    </fieldset>
  );
}

/** A plan approval: the plan (the one question's text, Markdown), approve, or reject with what to change. */
function PlanApproval({
  interaction,
  disabled,
  onAnswer,
}: {
  interaction: Interaction;
  disabled: boolean;
  onAnswer: (answers: AnswerMap) => void;
}) {
  const [text, setText] = useState('');
  const textId = useId();
  const plan = interaction.questions[0];
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        onAnswer({ plan: { kind: 'approve' } });
      }}
    >
      {plan && (
        <ItemBoundary resetKey={plan.question}>
          <Markdown text={plan.question} />
        </ItemBoundary>
      )}
      <label htmlFor={textId}>What to change (for a rejection, optional)</label>
      <textarea id={textId} rows={3} value={text} disabled={disabled} onChange={(e) => setText(e.target.value)} />
      <div className="buttons">
        <button type="submit" disabled={disabled}>
          Approve plan
        </button>
        <button
          type="button"
          disabled={disabled}
          onClick={() => onAnswer({ plan: text.trim() ? { kind: 'reject', text: text.trim() } : { kind: 'reject' } })}
        >
          Reject plan
        </button>
      </div>
    </form>
  );
}

/** An API error as a sentence with its code. */
export function describeError(error: unknown, status: number): string {
  const e = (error as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (e && typeof e.code === 'string') return `${typeof e.message === 'string' ? e.message : 'Refused'} (${e.code})`;
  return `The gateway answered HTTP ${status}.`;
}
