import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { components } from './components.js';
import { CLI } from './testing.js';

/**
 * `--help` of every command answers and starts nothing: DATA_DIR (which any real start creates,
 * if only for the generated secrets) stays absent, and DATABASE_URL names a server that refuses
 * connections, so a migration that ran would fail instead of exiting 0. A component that started
 * would keep running until the time-out kills it (status null).
 */
function codeagent(args: string[]): { status: number | null; stdout: string; stderr: string; dataDirCreated: boolean } {
  const dataDir = join(mkdtempSync(join(tmpdir(), 'codeagent-help-')), 'data');
  const result = spawnSync(process.execPath, [CLI, ...args], {
    env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', STORAGE_BACKEND: 'local', LOG_LEVEL: 'warn' },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, dataDirCreated: existsSync(dataDir) };
}

const commands = ['start', ...Object.keys(components), 'migrate', 'healthcheck', 'nginx-config', 'import-pglite'];

describe('codeagent --help', () => {
  it('lists every command with its description', () => {
    const { status, stdout, dataDirCreated } = codeagent(['--help']);
    expect(status).toBe(0);
    expect(dataDirCreated).toBe(false);
    for (const name of commands) expect(stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
    expect(stdout).toContain('apply database migrations and exit');
  });

  it('shows the same list for `codeagent` alone and `codeagent -h`', () => {
    const alone = codeagent([]);
    expect(alone.status).toBe(0);
    expect(alone.stdout).toBe(codeagent(['-h']).stdout);
    expect(alone.stdout).toBe(codeagent(['help']).stdout);
  });

  it.each(commands)('%s --help and -h describe the command and its settings, and start nothing', (name) => {
    for (const flag of ['--help', '-h']) {
      const { status, stdout, stderr, dataDirCreated } = codeagent([name, flag]);
      expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
      expect(stdout).toContain(`Usage: codeagent ${name}`);
      expect(stdout).toMatch(/Settings it reads[^\n]*\n\s+\w+/);
      expect(stdout).toContain('DATA_DIR');
      expect(dataDirCreated).toBe(false);
    }
  });

  it("names each component's own settings", () => {
    expect(codeagent(['backend', '--help']).stdout).toMatch(/BACKEND_PORT[\s\S]*STORAGE_BACKEND/);
    expect(codeagent(['gateway', '--help']).stdout).toContain('TRUSTED_PROXIES');
    expect(codeagent(['migrate', '--help']).stdout).toContain('DATABASE_URL');
    expect(codeagent(['help', 'worker']).stdout).toContain('WORKER_CONCURRENCY');
  });

  it('refuses an unknown command or option with exit 2, names it, and starts nothing', () => {
    const unknown = codeagent(['strat']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'strat'");
    expect(unknown.stderr).toContain('codeagent --help');
    expect(unknown.dataDirCreated).toBe(false);
    const option = codeagent(['migrate', '--dry-run']);
    expect(option.status).toBe(2);
    expect(option.stderr).toContain("unknown option '--dry-run'");
    expect(option.dataDirCreated).toBe(false);
    const missing = codeagent(['nginx-config', '--output']);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain("'--output <file>' argument missing");
  });
});
