export * from './config.js';
export * from './errors.js';
export * from './lifecycle.js';
export * from './logger.js';
export * from './mongo.js';
export * from './nats.js';
export * from './runtime.js';
export * from './telemetry.js';
