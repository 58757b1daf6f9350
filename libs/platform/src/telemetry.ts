import {
  context,
  metrics,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type TextMapGetter,
  type TextMapSetter,
} from '@opentelemetry/api';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { MsgHdrs } from '@nats-io/nats-core';

export interface Telemetry {
  enabled: boolean;
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry SDK when OTEL_EXPORTER_OTLP_ENDPOINT is set (OTLP over HTTP; the
 * exporters read the standard OTEL_* variables themselves). Without it everything stays no-op:
 * spans are not recorded and no traceparent is injected.
 */
let started = false;

export function startTelemetry(serviceName: string, env: Record<string, string | undefined> = process.env): Telemetry {
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
    return { enabled: false, shutdown: async () => {} };
  }
  // One SDK per process: several services started in one process (tests) share the first one.
  if (started) return { enabled: true, shutdown: async () => {} };
  started = true;
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME ?? serviceName,
    traceExporter: new OTLPTraceExporter(),
    metricReaders: [
      new PeriodicExportingMetricReader({
        exporter: new OTLPMetricExporter(),
        exportIntervalMillis: Number(env.OTEL_METRIC_EXPORT_INTERVAL ?? 10_000),
      }),
    ],
  });
  sdk.start();
  return {
    enabled: true,
    shutdown: async () => {
      await sdk.shutdown();
      started = false;
    },
  };
}

/** Is an SDK recording spans in this process? Instrumentation with a cost checks this first. */
export const telemetryEnabled = () => started;

const natsSetter: TextMapSetter<MsgHdrs> = {
  set: (carrier, key, value) => carrier.set(key, value),
};

const natsGetter: TextMapGetter<MsgHdrs | undefined> = {
  get: (carrier, key) => carrier?.get(key) || undefined,
  keys: (carrier) => (carrier ? carrier.keys() : []),
};

/** Writes `traceparent` (and `tracestate`) of the active context into NATS headers. */
export function injectTraceContext(headers: MsgHdrs, ctx: Context = context.active()): void {
  propagation.inject(ctx, headers, natsSetter);
}

/** The context a NATS message was sent from, so the handler's span joins the sender's trace. */
export function extractTraceContext(headers: MsgHdrs | undefined): Context {
  return propagation.extract(context.active(), headers, natsGetter);
}

export const tracer = () => trace.getTracer('threadwork');

/** The trace id of the active span, or null when nothing is being recorded. */
export function activeTraceId(): string | null {
  const span = trace.getActiveSpan();
  return span && span.isRecording() ? span.spanContext().traceId : null;
}
export const meter = () => metrics.getMeter('threadwork');

/** Runs `fn` inside a span, recording an exception and error status if it throws. */
export async function withSpan<T>(
  name: string,
  opts: { kind?: SpanKind; attributes?: Record<string, string | number | boolean>; parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = opts.parent ?? context.active();
  return tracer().startActiveSpan(
    name,
    { kind: opts.kind ?? SpanKind.INTERNAL, attributes: opts.attributes },
    parent,
    async (span) => {
      try {
        return await fn(span);
      } catch (err) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw err;
      } finally {
        span.end();
      }
    },
  );
}

export { SpanKind };
export type { Histogram } from '@opentelemetry/api';
