// Admin CLI: `npm run admin -- keys create --user <login>` and friends. Talks to the gateway's own
// collections directly: it works against the running local stack (found through the stack file
// that `npm start` writes into THREADWORK_DATA_DIR) or against the MONGO_URL it is given. An entry
// of its own beside main.ts (deployments run `dist/admin.js`); the commands are in admin/.
import { runAdmin } from './admin/cli.js';
import { fail } from './admin/fail.js';

runAdmin(process.argv.slice(2)).catch((err: unknown) =>
  fail(`admin: ${err instanceof Error ? err.message : String(err)}`),
);
