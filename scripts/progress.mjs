// Progress of the bootstrap's long steps (install, build). Node built-ins only: it runs before
// node_modules exists. On a terminal a step is one live line (spinner, what it does, what the
// step can count, elapsed time) that becomes one final line with the duration; off a terminal
// (CI, a pipe, TERM=dumb) a step prints one line when it starts and one when it ends, with no
// control characters. The child's output is kept and printed only when the step fails: it is
// the reason. See docs/decisions/0095-bootstrap-progress.md.
import { spawn } from 'node:child_process';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const PREFIX = '[codeagent]';
/** The failure output keeps the last lines only (a build that fails prints its errors last). */
const KEEP_LINES = 400;

export const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

/** Escape sequences and other control characters, which must not reach a live line or a log. */
// eslint-disable-next-line no-control-regex
const CONTROL = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b.|[\x00-\x08\x0b-\x1f\x7f]/g;
export const plain = (text) => String(text).replace(CONTROL, '');

const fit = (text, room) => (text.length <= room ? text : text.slice(0, Math.max(room - 1, 0)) + '…');

export function isTerminal(stream) {
  return Boolean(stream.isTTY) && process.env.TERM !== 'dumb';
}

/**
 * Starts a step named `title` on `out` (stderr by default). `update(detail)` redraws the live
 * line (terminal only); `end(ok, summary)` prints the final line and returns the duration in ms.
 */
export function startStep(title, { out = process.stderr, tty = isTerminal(out) } = {}) {
  const t0 = Date.now();
  let detail = '';
  let frame = 0;
  let timer;
  // One terminal row: a narrow terminal cuts the detail first, then the title, never the time.
  const draw = () => {
    const width = (out.columns || 80) - 1;
    const head = `${PREFIX} ${FRAMES[frame++ % FRAMES.length]} `;
    const time = ` · ${seconds(Date.now() - t0)}`;
    const name = fit(title, width - head.length - time.length);
    const room = width - head.length - name.length - time.length - 3;
    out.write(`\r\x1b[2K${head}${name}${time}${detail && room > 1 ? ` · ${fit(detail, room)}` : ''}`);
  };
  // Ctrl-C during a step: end the live line, so that the shell's prompt starts on a row of its
  // own, then stop as Ctrl-C would have (the listener is gone, the signal's default applies).
  const interrupted = () => {
    clearInterval(timer);
    out.write('\n');
    process.kill(process.pid, 'SIGINT');
  };
  if (tty) {
    draw();
    timer = setInterval(draw, 100);
    process.once('SIGINT', interrupted);
  } else {
    out.write(`${PREFIX} ${title}…\n`);
  }
  return {
    update(text) {
      const next = plain(text).trim();
      if (next === detail) return;
      detail = next;
      if (tty) draw();
    },
    end(ok, summary = '') {
      const ms = Date.now() - t0;
      clearInterval(timer);
      process.removeListener('SIGINT', interrupted);
      const result = `${ok ? 'done in' : 'FAILED after'} ${seconds(ms)}${summary ? ` (${plain(summary)})` : ''}`;
      out.write(tty ? `\r\x1b[2K${PREFIX} ${ok ? '✔' : '✖'} ${title}: ${result}\n` : `${PREFIX} ${title}: ${result}\n`);
      return ms;
    },
  };
}

/**
 * Runs `cmd args` as the step `title`; its output is read line by line by `tracker` (see
 * tscTracker): `line(text)` returns false for a line that is progress chatter (not kept for the
 * failure output), `detail()` is shown on the live line, `summary()` on the final one. On failure
 * the kept output follows the final line. Resolves to { code, ms }.
 */
export function runStep(title, cmd, args, { cwd, env, tracker = lastLineTracker(), out = process.stderr, tty = isTerminal(out) } = {}) {
  const step = startStep(title, { out, tty });
  const kept = [];
  const onLine = (line) => {
    if (tracker.line(line) !== false) {
      kept.push(line);
      if (kept.length > KEEP_LINES) kept.shift();
    }
    step.update(tracker.detail());
  };
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    for (const stream of [child.stdout, child.stderr]) {
      let rest = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => {
        const lines = (rest + chunk).split(/\r?\n|\r/);
        rest = lines.pop();
        lines.forEach(onLine);
      });
      stream.on('end', () => rest && onLine(rest));
    }
    let spawnError;
    child.once('error', (err) => {
      spawnError = err;
    });
    child.once('close', (code, signal) => {
      const status = spawnError ? 1 : (code ?? (signal ? 1 : 0));
      const ms = step.end(status === 0, status === 0 ? tracker.summary() : '');
      if (status !== 0) {
        if (spawnError) kept.push(`${cmd}: ${spawnError.message}`);
        const text = kept
          .map((l) => (tty ? l : plain(l)))
          .join('\n')
          .trim();
        if (text) out.write(`${text}\n`);
      }
      resolve({ code: status, ms });
    });
  });
}

/** Shows the last non-empty line of the child's output as the detail. */
export function lastLineTracker() {
  let last = '';
  return {
    line(text) {
      if (plain(text).trim()) last = text;
      return true;
    },
    detail: () => last,
    summary: () => '',
  };
}

/**
 * Reads `tsc -b --verbose`: the list of projects first, then one message per project it looks
 * at. Detail: "3/17 packages/auth"; summary: "17 projects, 2 built". Its verbose messages are
 * chatter; the compiler's errors are kept.
 */
export function tscTracker() {
  let total = 0;
  let listing = false;
  const seen = new Set();
  const built = new Set();
  let current = '';
  // "4:18:54 PM - Projects in this build:" (the time is in the machine's locale).
  const stamped = /^\[?[\d:. ]+(?:[AP]M)?\]? - (.*)$/;
  return {
    line(text) {
      const line = plain(text);
      const m = stamped.exec(line);
      if (m) {
        listing = /^Projects in this build/.test(m[1]);
        const project = /^Project '([^']+)'/.exec(m[1]);
        if (project) {
          seen.add(project[1]);
          current = project[1].replace(/\/tsconfig(\.[\w-]+)?\.json$/, '');
        }
        const building = /^Building project '([^']+)'/.exec(m[1]);
        if (building) built.add(building[1]);
        return false;
      }
      if (listing && /^\s+\* /.test(line)) {
        total++;
        return false;
      }
      listing = false;
      return line.trim() !== '';
    },
    detail: () => (total && seen.size ? `${seen.size}/${total} ${current}` : ''),
    summary: () => (total ? `${total} projects, ${built.size} built` : ''),
  };
}

/**
 * Reads extensions/build.mjs: its stage lines "[extensions] (1/2) name: npm ci" become the
 * detail, and the final "name: up to date" or timings lines the summary.
 */
export function extensionsTracker() {
  let detail = '';
  const results = [];
  return {
    line(text) {
      const m = /^\[extensions\] (.*)$/.exec(plain(text));
      if (!m) return true;
      const done = /^\(\d+\/\d+\) ([^:]+): (up to date|npm ci .* s, build .* s)$/.exec(m[1]);
      if (done) results.push(`${done[1]} ${done[2]}`);
      else detail = m[1];
      return true;
    },
    detail: () => detail,
    summary: () => results.join('; '),
  };
}
