import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The progress helper of `npm start` / `npm test` (scripts/progress.mjs), run as the bootstrap
// runs it: on a pseudo-terminal (`script` of util-linux) and on pipes, as in CI.
const PROGRESS = new URL('../../scripts/progress.mjs', import.meta.url).href;

// Three steps: one that reads `tsc -b --verbose` output (written here, so that the counts are
// known), one that fails with a coloured reason, one whose output tries to take over the terminal.
const fixture = `
import { extensionsTracker, lastLineTracker, runStep, tscTracker } from ${JSON.stringify(PROGRESS)};
const node = process.execPath;
const tscOutput = [
  '4:18:54 PM - Projects in this build: ',
  '    * packages/a/tsconfig.json',
  '    * packages/b/tsconfig.json',
  '    * cli/tsconfig.json',
  '',
  "4:18:54 PM - Project 'packages/a/tsconfig.json' is up to date because newest input 'x' is older than output 'y'",
  "4:18:55 PM - Project 'packages/b/tsconfig.json' is out of date because output file 'z' does not exist",
  "4:18:55 PM - Building project '/repo/packages/b/tsconfig.json'...",
  "4:18:56 PM - Project 'cli/tsconfig.json' is out of date because output file 'w' does not exist",
  "4:18:56 PM - Building project '/repo/cli/tsconfig.json'...",
].join('\\n');
const ok = await runStep('building the fixture projects', node, ['-e', 'console.log(process.argv[1])', tscOutput], { tracker: tscTracker() });
const failed = await runStep('a step that fails', node, ['-e', 'console.log("warming up"); console.error("\\\\x1b[31mthe reason: disk full\\\\x1b[0m"); process.exit(3)']);
const hostile = await runStep('a step with hostile output', node, ['-e', 'console.log("\\\\x1b[2J\\\\x1b[Hscreen wiped " + "x".repeat(300))'], { tracker: lastLineTracker() });
const stagesOutput = ['[extensions] (1/2) lab-ext: npm ci', 'webpack chatter', '[extensions] (1/2) lab-ext: npm ci 1.0 s, build 2.0 s', '[extensions] (2/2) lab-host: up to date'].join('\\n');
const stages = await runStep('building the extensions', node, ['-e', 'console.error(process.argv[1])', stagesOutput], { tracker: extensionsTracker() });
const long = await runStep('a step whose title is longer than the terminal ' + 'y'.repeat(100), node, ['-e', 'console.log("some detail")']);
console.error(JSON.stringify({ codes: [ok.code, failed.code, hostile.code, stages.code, long.code] }));
`;

function writeFixture(): string {
  const dir = mkdtempSync(join(tmpdir(), 'codeagent-progress-'));
  const file = join(dir, 'fixture.mjs');
  writeFileSync(file, fixture);
  return file;
}

const ESC = '\x1b';

describe('bootstrap progress', () => {
  it('on a terminal: a live line with the elapsed time and the counts, then one final line per step with its duration', () => {
    const hasScript = spawnSync('script', ['--version']).status === 0;
    expect(hasScript, 'needs `script` of util-linux (apt-get install util-linux)').toBe(true);
    const file = writeFixture();
    const out = execFileSync('script', ['-qec', `'${process.execPath}' '${file}'`, '/dev/null'], { encoding: 'utf8', env: { ...process.env, TERM: 'xterm' } });
    // Each redraw starts with a carriage return and "erase line".
    const frames = out.split('\r').map((f) => f.replace(/\n$/, ''));
    const live = frames.filter((f) => f.startsWith(`${ESC}[2K`) && !/[✔✖]/.test(f));
    expect(live.some((f) => /building the fixture projects · \d+\.\d s$/.test(f))).toBe(true);
    expect(live.some((f) => /building the fixture projects · \d+\.\d s · 2\/3 packages\/b$/.test(f))).toBe(true);
    expect(live.some((f) => /building the fixture projects · \d+\.\d s · 3\/3 cli$/.test(f))).toBe(true);
    expect(out).toMatch(/\[codeagent\] ✔ building the fixture projects: done in \d+\.\d s \(3 projects, 2 built\)\r?\n/);
    expect(out).toMatch(/\[codeagent\] ✖ a step that fails: FAILED after \d+\.\d s\r?\n/);
    // The failure shows the child's output (all of it, colours kept on a terminal); a success shows none.
    expect(out).toContain('warming up');
    expect(out).toContain(`${ESC}[31mthe reason: disk full`);
    expect(out).not.toContain('Building project');
    expect(out).toMatch(/\[codeagent\] ✔ a step with hostile output: done in \d+\.\d s/);
    expect(live.some((f) => /building the extensions · \d+\.\d s · \(1\/2\) lab-ext: npm ci$/.test(f))).toBe(true);
    expect(out).toMatch(/✔ building the extensions: done in \d+\.\d s \(lab-ext npm ci 1\.0 s, build 2\.0 s; lab-host up to date\)/);
    expect(out).toContain('"codes":[0,3,0,0,0]');
  });

  it('on a terminal: a child cannot clear the screen or break the live line out of one terminal row', () => {
    const file = writeFixture();
    const out = execFileSync('script', ['-qec', `'${process.execPath}' '${file}'`, '/dev/null'], { encoding: 'utf8', env: { ...process.env, TERM: 'xterm' } });
    expect(out).not.toContain(`${ESC}[2J`);
    expect(out).not.toContain(`${ESC}[H`);
    const hostile = out.split('\r').filter((f) => f.includes('hostile output ·'));
    expect(hostile.some((f) => f.includes('screen wiped xxx'))).toBe(true);
    // `script` without a terminal of its own gives 0 columns: the helper assumes 80.
    for (const f of hostile) {
      expect(f.replace(`${ESC}[2K`, '').length).toBeLessThanOrEqual(79);
      // The detail is cut, never the elapsed time.
      expect(f).toMatch(/hostile output · \d+\.\d s( · screen wiped x+…)?$/);
    }
    // A title too long for the row is cut before the time is.
    const long = out.split('\r').filter((f) => f.includes('a step whose title') && !f.includes('✔'));
    expect(long.length).toBeGreaterThan(0);
    for (const f of long) {
      expect(f.replace(`${ESC}[2K`, '').length).toBeLessThanOrEqual(79);
      expect(f).toMatch(/y…( · \d+\.\d s)$/);
    }
  });

  it('off a terminal (CI): one line at the start and one at the end of each step, no control characters', () => {
    const file = writeFixture();
    const res = spawnSync(process.execPath, [file], { encoding: 'utf8', env: { ...process.env, TERM: 'xterm' } });
    expect(res.status).toBe(0);
    expect(res.stdout).toBe('');
    // eslint-disable-next-line no-control-regex
    expect(res.stderr).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/);
    const lines = res.stderr.trimEnd().split('\n');
    expect(lines.map((l) => l.replace(/\d+\.\d s/, 'N s'))).toEqual([
      '[codeagent] building the fixture projects…',
      '[codeagent] building the fixture projects: done in N s (3 projects, 2 built)',
      '[codeagent] a step that fails…',
      '[codeagent] a step that fails: FAILED after N s',
      // The reason, its colour codes removed (the order of stdout and stderr lines may vary).
      ...['the reason: disk full', 'warming up'].sort((a, b) => lines.indexOf(a) - lines.indexOf(b)),
      '[codeagent] a step with hostile output…',
      '[codeagent] a step with hostile output: done in N s',
      '[codeagent] building the extensions…',
      '[codeagent] building the extensions: done in N s (lab-ext npm ci 1.0 s, build 2.0 s; lab-host up to date)',
      `[codeagent] a step whose title is longer than the terminal ${'y'.repeat(100)}…`,
      `[codeagent] a step whose title is longer than the terminal ${'y'.repeat(100)}: done in N s`,
      '{"codes":[0,3,0,0,0]}',
    ]);
  });

  it('TERM=dumb counts as no terminal even on a pseudo-terminal', () => {
    const file = writeFixture();
    const out = execFileSync('script', ['-qec', `'${process.execPath}' '${file}'`, '/dev/null'], { encoding: 'utf8', env: { ...process.env, TERM: 'dumb' } });
    expect(out).not.toContain(ESC);
    expect(out).toContain('[codeagent] building the fixture projects: done in');
  });

  it('the helper is Node built-ins only (it runs before node_modules exists)', () => {
    const source = readFileSync(fileURLToPath(PROGRESS), 'utf8');
    const imports = [...source.matchAll(/^import .* from '([^']+)';$/gm)].map((m) => m[1]);
    expect(imports.length).toBeGreaterThan(0);
    for (const name of imports) expect(name).toMatch(/^node:/);
  });
});

describe('bootstrap progress, interrupted', () => {
  it('Ctrl-C during a step ends the live line (the prompt starts on its own row) and stops', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'codeagent-progress-'));
    const file = join(dir, 'interrupted.mjs');
    writeFileSync(
      file,
      `import { runStep } from ${JSON.stringify(PROGRESS)};
await runStep('a step that waits', process.execPath, ['-e', 'console.log("ready"); setInterval(() => {}, 1000)']);
console.error('not reached');
`,
    );
    const child = spawn('script', ['-qec', `exec '${process.execPath}' '${file}'`, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, TERM: 'xterm' },
    });
    let out = '';
    child.stdout.setEncoding('utf8');
    const exited = new Promise((resolve) => child.once('exit', resolve));
    await new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk: string) => {
        out += chunk;
        if (out.includes('· ready')) resolve();
      });
    });
    // As a terminal does: Ctrl-C reaches the whole foreground process group (script's child leads it).
    const pgid = Number(execFileSync('ps', ['-o', 'pgid=', '--ppid', String(child.pid)], { encoding: 'utf8' }).trim());
    process.kill(-pgid, 'SIGINT');
    await exited;
    expect(out).toMatch(/a step that waits · \d+\.\d s · ready\r?\n$/);
    expect(out).not.toContain('not reached');
  });
});
