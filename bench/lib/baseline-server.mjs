#!/usr/bin/env node
// The baselines the gateway is measured against: bare fastify routes (no auth, validation,
// telemetry hooks or NATS hop) doing the least work that answers the same question, against the
// same FerretDB and NATS. Runs as a process of its own, like a service, so neither side shares an
// event loop with the load generator. Settings come from the environment: PORT, MONGO_URL,
// MONGO_DB_PREFIX, NATS_URL, NATS_NKEY_SEED (the gateway's).
import Fastify from 'fastify';
import { subjects } from '@threadwork/contracts';
import { connectMongo, connectNats, createLogger, natsAuthWithSeed, serviceDbName } from '@threadwork/platform';

const { PORT, MONGO_URL, MONGO_DB_PREFIX, NATS_URL, NATS_NKEY_SEED } = process.env;

const mongo = await connectMongo({ url: MONGO_URL, appName: 'bench-baseline' });
const runs = mongo.db(serviceDbName(MONGO_DB_PREFIX, 'runs')).collection('runs');
const nc = await connectNats({
  servers: NATS_URL,
  auth: natsAuthWithSeed(NATS_NKEY_SEED, 'gateway'),
  name: 'bench-baseline',
  logger: createLogger({ service: 'bench-baseline', level: 'warn' }),
});

// Open event streams must not hold up a stop.
const app = Fastify({ logger: false, forceCloseConnections: true });

app.get('/healthz', async () => ({ status: 'ok' }));

// The runs service's read of a run, straight from its collection.
app.get('/runs/:id', async (request, reply) => {
  const run = await runs.findOne({ _id: request.params.id });
  return run ?? reply.code(404).send({ error: 'not found' });
});

// A run's live events as Server-Sent Events, the least work that does it: one core subscription
// per run whatever the number of followers, each stored event framed once and written to every
// follower as it was republished (no auth, page reads, parsing or reframing).
const followersByRun = new Map();
function followRun(runId, raw) {
  let followers = followersByRun.get(runId);
  if (!followers) {
    const set = new Set();
    const subscription = nc.subscribe(subjects.runLive(runId), {
      callback: (err, msg) => {
        if (err) return;
        const frame = `id: ${msg.headers?.get('Nats-Sequence') ?? ''}\ndata: ${msg.string()}\n\n`;
        for (const follower of set) follower.write(frame);
      },
    });
    followers = { set, subscription };
    followersByRun.set(runId, followers);
  }
  followers.set.add(raw);
  raw.once('close', () => {
    followers.set.delete(raw);
    if (followers.set.size > 0) return;
    followers.subscription.unsubscribe();
    followersByRun.delete(runId);
  });
}

app.get('/runs/:id/stream', (request, reply) => {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  raw.write(': open\n\n');
  followRun(request.params.id, raw);
});

await app.listen({ port: Number(PORT), host: '127.0.0.1' });

const stop = async () => {
  await app.close();
  await nc.drain();
  await mongo.close();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
