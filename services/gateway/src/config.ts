import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

export const GatewayConfig = z.object({
  ...baseConfigShape,
  /** Port of the public HTTP API. */
  PORT: env.port(8080),
  /** Address to bind; 0.0.0.0 in a container, loopback for a laptop. */
  HOST: z.string().min(1).default('0.0.0.0'),
  /** How long the gateway waits for a backing service before answering 503. */
  REQUEST_TIMEOUT_MS: env.duration(5_000),
  /** Largest request body accepted (413 above it). */
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
});
export type GatewayConfig = z.output<typeof GatewayConfig>;
