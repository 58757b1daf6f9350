// The kubernetes provider's pod lifecycle, apart from the runner's entry so that nothing loads the
// Kubernetes client unless it is used (and for the tests against a real API server, test/cluster).
export { loadKubeConfig, podSettings, SandboxPods, type SandboxPod, type SandboxPodsOptions } from './pods.js';
export * from './spec.js';
export { podState, type PodState } from './status.js';
export { exitCode, kubeExec, localExec, type ExecIo, type ExecResult, type PodExec } from './exec.js';
export { BundleError, receiveTree, sendBranch } from './bundle.js';
export {
  openPodBridge,
  podBridgeArgv,
  type PodBridge,
  type PodBridgeExit,
  type PodBridgeOptions,
  type PodRoute,
} from './bridge.js';
export { podHost, type OpenPodGates, type PodGates, type PodHostOptions } from './process.js';
export { bridgedGates, type GatePorts } from './gates.js';
export {
  DEFAULT_COLLECT_MAX_BYTES,
  KubernetesSandboxProvider,
  type KubernetesSandboxOptions,
  type PodLifecycle,
} from './provider.js';
