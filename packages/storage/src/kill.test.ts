import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LocalObjectStore } from './local.js';

const FIXTURE = fileURLToPath(new URL('../dist/kill-fixture.js', import.meta.url));

describe('local backend: a process killed mid-write', () => {
  it('leaves the previous content and no partial file in the area after restart', async () => {
    const base = mkdtempSync(join(tmpdir(), 'codeagent-kill-'));
    const before = new LocalObjectStore(base);
    await before.init();
    await before.put('workspace', 'ws/victim.bin', Readable.from(['previous content']));

    const child = spawn(process.execPath, [FIXTURE, base, 'ws/victim.bin'], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (c: Buffer) => c.toString().includes('writing') && resolve());
      child.once('exit', (code) => reject(new Error(`fixture exited early (${code})`)));
    });
    const staged = readdirSync(join(base, '.staging', 'workspace'));
    expect(staged.length).toBe(1); // the half-written temporary file exists while it runs
    expect(statSync(join(base, '.staging', 'workspace', staged[0]!)).size).toBeGreaterThan(0);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));

    const after = new LocalObjectStore(base);
    await after.init();
    expect(readdirSync(join(base, '.staging', 'workspace'))).toEqual([]);
    expect(readFileSync(join(base, 'workspace', 'ws', 'victim.bin'), 'utf8')).toBe('previous content');
    expect(readdirSync(join(base, 'workspace', 'ws'))).toEqual(['victim.bin']);
    expect(existsSync(join(base, 'workspace', 'ws', 'victim.bin.part'))).toBe(false);
  });
});
