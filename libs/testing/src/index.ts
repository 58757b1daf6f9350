export * from './servers.js';
export * from './env.js';
