export type ToolName =
  | 'nats-server'
  | 'ferretdb'
  | 'helm'
  | 'etcd'
  | 'kube-apiserver'
  | 'kube-controller-manager'
  | 'kube-scheduler'
  | 'kwok';
export declare const TOOLS: Record<
  ToolName,
  {
    version: string;
    about: string;
    minutes: string;
    module?: string;
    launcher?: string;
    package?: string;
    binary?: string;
    ldflags?: string[];
    patch?: string;
    revision?: number;
  }
>;
export declare const CONTROL_PLANE_TOOLS: ToolName[];
export declare function toolsDir(): string;
export declare function toolPath(name: ToolName): string;
export declare function ensureTool(name: ToolName, opts?: { log?: (line: string) => void }): string;
export declare function ensureTools(names: ToolName[]): Record<string, string>;
export declare function ensureSystemPackages(names?: ('bubblewrap' | 'chromium')[]): void;
export declare function haveGo(): boolean;
export declare function toolsCached(names: ToolName[]): boolean;
