// The local stack and the tests start servers the same way; the code lives with the stack scripts
// because those run before anything is built.
export {
  startFerretDb,
  startNatsServer,
  type LocalServer,
  type ServerOptions,
} from '../../../deploy/local/servers.mjs';
