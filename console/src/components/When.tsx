/** A timestamp as the reader's local date and time, the exact instant in `dateTime`. */
export function When({ at }: { at: string | undefined }) {
  if (!at) return <span>—</span>;
  const date = new Date(at);
  return (
    <time dateTime={at} title={date.toISOString()}>
      {date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}
    </time>
  );
}
