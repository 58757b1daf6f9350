export declare const TOOLS: Record<
  string,
  { version: string; about: string; minutes: string; module?: string; launcher?: string; binary?: string }
>;
export declare function toolsDir(): string;
export declare function toolPath(name: 'nats-server' | 'ferretdb' | 'helm'): string;
export declare function ensureTool(
  name: 'nats-server' | 'ferretdb' | 'helm',
  opts?: { log?: (line: string) => void },
): string;
export declare function ensureTools(names: ('nats-server' | 'ferretdb' | 'helm')[]): Record<string, string>;
export declare function ensureSystemPackages(names?: 'bubblewrap'[]): void;
