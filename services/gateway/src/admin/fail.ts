/** Says what went wrong on stderr and exits 1: the CLI's one way to stop on an error. */
export function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}
