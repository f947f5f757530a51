#!/usr/bin/env node
import { ConfigError, loadConfig } from '@codeagent/config';
import { components, type ComponentName } from './components.js';
import { runMigrations } from './migrate.js';
import { superviseAll } from './supervisor.js';

const USAGE = `usage: codeagent <command>

commands:
  start            start the whole platform on this machine (embedded defaults)
${Object.entries(components)
  .map(([name, c]) => `  ${name.padEnd(16)} ${c.description}`)
  .join('\n')}
  migrate          apply database migrations and exit
  help             show this text

Settings come from environment variables; see README.md.`;

async function main(argv: string[]): Promise<number> {
  const command = argv[0] ?? 'help';
  if (command === 'help' || command === '--help' || command === '-h') {
    console.log(USAGE);
    return 0;
  }
  if (command === 'start') {
    return superviseAll();
  }
  if (command === 'migrate') {
    return runMigrations(loadConfig());
  }
  if (command in components) {
    const config = loadConfig();
    await components[command as ComponentName].start(config);
    return -1; // keeps running until a signal
  }
  console.error(`unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    if (err instanceof ConfigError) {
      console.error(`codeagent: ${err.message}`);
      process.exit(78); // EX_CONFIG
    }
    console.error(`codeagent: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
