export * from './env.js';
export * from './nats.js';
export * from './servers.js';
export * from './git.js';
export * from './fake-model.js';
export * from './fake-github.js';
export * from './otlp-receiver.js';
export * from './github-schemas.js';
