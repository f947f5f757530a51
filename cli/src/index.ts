#!/usr/bin/env node
import { CommanderError } from 'commander';
import { ConfigError } from '@codeagent/config';
import { cliProgram } from './commands.js';

/**
 * Errors whose message already names the setting and the fix (StartError of the preflight,
 * DatabaseUnavailableError and EmbeddedDatabaseError of packages/db, StorageUnavailableError of
 * packages/storage): printed alone, without the hint about LOG_LEVEL=debug.
 */
const KNOWN_FAILURES = new Set(['StartError', 'DatabaseUnavailableError', 'EmbeddedDatabaseError', 'StorageUnavailableError']);

async function main(argv: string[]): Promise<number> {
  const { program, exitCode } = cliProgram();
  try {
    // `codeagent` alone shows the list of commands.
    await program.parseAsync(argv.length === 0 ? ['--help'] : argv, { from: 'user' });
  } catch (err) {
    // Help was printed (exit 0), or the command line was wrong: commander said why on stderr.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    throw err;
  }
  return exitCode();
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    const who = `codeagent${process.argv[2] && process.argv[2] !== 'start' ? ` ${process.argv[2]}` : ''}`;
    if (err instanceof ConfigError) {
      console.error(`${who}: ${err.message}`);
      process.exit(78); // EX_CONFIG
    }
    // Failures with a known cause are one line that names the setting and the fix; anything else
    // is one line too, with its stack only at LOG_LEVEL=debug. Known by name, so that printing
    // `--help` loads neither the database nor the storage code.
    const known = err instanceof Error && KNOWN_FAILURES.has(err.name);
    const listen = (err as NodeJS.ErrnoException).code === 'EADDRINUSE';
    if (process.env.LOG_LEVEL === 'debug') {
      console.error(`${who}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    } else {
      const message = listen
        ? `${(err as Error).message}: the port is taken by another program; stop it or choose another port`
        : err instanceof Error
          ? err.message
          : String(err);
      console.error(`${who}: ${message}${known || listen ? '' : ' (LOG_LEVEL=debug shows the stack)'}`);
    }
    process.exit(1);
  },
);
