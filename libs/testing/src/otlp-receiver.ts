import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** A span as an OTLP/HTTP JSON export carries it, with the service that sent it. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** Base URL for OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  spans(): ReceivedSpan[];
  /** Metric names received, per service. */
  metrics(): Map<string, Set<string>>;
  stop(): Promise<void>;
}

interface KeyValue {
  key: string;
  value: { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean };
}

const attributes = (list: KeyValue[] | undefined): Record<string, unknown> =>
  Object.fromEntries(
    (list ?? []).map(({ key, value }) => [
      key,
      value.stringValue ?? value.intValue ?? value.doubleValue ?? value.boolValue,
    ]),
  );

const serviceOf = (resource: { attributes?: KeyValue[] } | undefined) =>
  String(attributes(resource?.attributes)['service.name'] ?? 'unknown');

async function body(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  const text = (req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8');
  return JSON.parse(text);
}

/**
 * An OTLP/HTTP receiver (JSON encoding, what `@opentelemetry/exporter-*-otlp-http` sends) on
 * loopback, keeping what real services export so a test can assert on traces and metrics.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const metrics = new Map<string, Set<string>>();
  const server = createServer((req, res) => {
    body(req).then(
      (payload) => {
        if (req.url === '/v1/traces') {
          for (const rs of (
            payload as {
              resourceSpans?: {
                resource?: { attributes?: KeyValue[] };
                scopeSpans?: { spans?: Record<string, unknown>[] }[];
              }[];
            }
          ).resourceSpans ?? []) {
            const service = serviceOf(rs.resource);
            for (const ss of rs.scopeSpans ?? []) {
              for (const s of ss.spans ?? []) {
                spans.push({
                  service,
                  traceId: String(s.traceId),
                  spanId: String(s.spanId),
                  parentSpanId: s.parentSpanId ? String(s.parentSpanId) : undefined,
                  name: String(s.name),
                  kind: Number(s.kind),
                  attributes: attributes(s.attributes as KeyValue[] | undefined),
                });
              }
            }
          }
        } else if (req.url === '/v1/metrics') {
          for (const rm of (
            payload as {
              resourceMetrics?: {
                resource?: { attributes?: KeyValue[] };
                scopeMetrics?: { metrics?: { name: string }[] }[];
              }[];
            }
          ).resourceMetrics ?? []) {
            const service = serviceOf(rm.resource);
            const names = metrics.get(service) ?? new Set<string>();
            for (const sm of rm.scopeMetrics ?? []) for (const m of sm.metrics ?? []) names.add(m.name);
            metrics.set(service, names);
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      },
      () => res.writeHead(400).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => [...spans],
    metrics: () => metrics,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
