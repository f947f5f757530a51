import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, isPrettyFormat, redactUrl } from './logging.js';

function sink(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

const SECRETS = ['Bearer tok-AUTH', 'sid=tok-COOKIE', 'tok-INTERNAL', 'tok-PASSWORD', 'tok-FIELD', 'tok-QUERY', 'tok-SETCOOKIE', 'tok-ACCESS'];

/** One record of each kind of secret a component might log. */
function logSecrets(format: 'json' | 'pretty'): string {
  const out = sink();
  const log = createLogger({ level: 'info', format }, 'backend', out.stream);
  const child = log.child({ reqId: 'req-1' });
  child.info(
    {
      req: {
        method: 'GET',
        url: '/jupyter/api?token=tok-QUERY&page=2',
        headers: { authorization: 'Bearer tok-AUTH', cookie: 'sid=tok-COOKIE', 'x-internal-service-token': 'tok-INTERNAL' },
      },
      res: { statusCode: 200, headers: { 'set-cookie': 'sid=tok-SETCOOKIE' } },
      responseTime: 1.25,
    },
    'request completed',
  );
  child.info({ body: { email: 'a@b.c', password: 'tok-PASSWORD' }, token: 'tok-FIELD', access_token: 'tok-ACCESS' }, 'login');
  return out.text();
}

describe('component logs', () => {
  it('JSON: one object a line, secrets redacted (headers, fields, query parameters of the URL)', () => {
    const text = logSecrets('json');
    for (const secret of SECRETS) expect(text).not.toContain(secret);
    const [first, second] = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(first).toMatchObject({
      level: 30,
      name: 'backend',
      reqId: 'req-1',
      msg: 'request completed',
      req: { method: 'GET', url: '/jupyter/api?token=[redacted]&page=2' },
    });
    expect(second).toMatchObject({ token: '[redacted]', access_token: '[redacted]', body: { email: 'a@b.c', password: '[redacted]' } });
  });

  it('pretty: one readable line a record (time, level, component, request id, message, request), secrets redacted', () => {
    const text = logSecrets('pretty');
    for (const secret of SECRETS) expect(text).not.toContain(secret);
    const lines = text.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: backend \[req-1\] request completed GET \/jupyter\/api\?token=\[redacted\]&page=2 200 1\.3 ms$/);
    expect(lines[1]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: backend \[req-1\] login \{.*"password":"\[redacted\]".*\}$/);
    expect(text).not.toContain('{"level"');
  });

  it('pretty: an error is its message on the line, its stack only at debug', () => {
    const info = sink();
    createLogger({ level: 'info', format: 'pretty' }, 'worker', info.stream).warn(
      { err: Object.assign(new Error('disk full'), { code: 'ENOSPC' }) },
      'run failed',
    );
    expect(info.text()).toMatch(/WARN: worker run failed \(ENOSPC: disk full\)\n$/);
    const debug = sink();
    createLogger({ level: 'debug', format: 'pretty' }, 'worker', debug.stream).warn({ err: new Error('disk full') }, 'run failed');
    expect(debug.text()).toMatch(/\n\s+at /);
  });

  it('auto is pretty on a terminal only; json and pretty are forced', () => {
    expect(isPrettyFormat('auto', { isTTY: true })).toBe(true);
    expect(isPrettyFormat('auto', { isTTY: false })).toBe(false);
    expect(isPrettyFormat('auto', {})).toBe(false);
    expect(isPrettyFormat('json', { isTTY: true })).toBe(false);
    expect(isPrettyFormat('pretty', { isTTY: false })).toBe(true);
  });

  it('redactUrl keeps paths and harmless parameters, redacts secret ones in any case or encoding', () => {
    expect(redactUrl('/api/v1/health')).toBe('/api/v1/health');
    expect(redactUrl('/a?page=2&limit=5')).toBe('/a?page=2&limit=5');
    expect(redactUrl('/a?Token=x&API_KEY=y&%74oken=z&flag')).toBe('/a?Token=[redacted]&API_KEY=[redacted]&%74oken=[redacted]&flag');
    // A lab's ticket (decision 0263) in the address its login is sent to.
    expect(redactUrl('/jupyter/w/codeagent-lab-login?ticket=labt.x.y&next=%2Fjupyter%2Fw%2Flab')).toBe(
      '/jupyter/w/codeagent-lab-login?ticket=[redacted]&next=%2Fjupyter%2Fw%2Flab',
    );
  });
});
