import { afterEach, describe, expect, it, vi } from 'vitest';
import { PARALLEL_UPLOADS, uploadFile } from './upload';

/** A stand-in for the browser's XMLHttpRequest: records what was sent, ends when told. */
class FakeXhr {
  static all: FakeXhr[] = [];
  sent = false;
  aborted = false;
  status = 0;
  responseText = '';
  upload: { onprogress?: (e: { loaded: number; lengthComputable: boolean; total: number }) => void } = {};
  onload?: () => void;
  onerror?: () => void;
  onabort?: () => void;
  constructor() {
    FakeXhr.all.push(this);
  }
  open(): void {}
  setRequestHeader(): void {}
  send(): void {
    this.sent = true;
  }
  abort(): void {
    this.aborted = true;
    this.onabort?.();
  }
  finish(status = 201): void {
    this.status = status;
    this.onload?.();
  }
}

describe('uploadFile', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    FakeXhr.all = [];
  });

  it(`sends ${PARALLEL_UPLOADS} at once and the others in their turn; a waiting one cancelled is never sent (decision 0256)`, async () => {
    vi.stubGlobal('XMLHttpRequest', FakeXhr);
    const handles = Array.from({ length: PARALLEL_UPLOADS + 3 }, (_, i) => uploadFile('ws', `f${i}`, new Blob(['x']), () => undefined));
    const sent = () => FakeXhr.all.filter((x) => x.sent).length;
    expect(sent()).toBe(PARALLEL_UPLOADS);
    // The first waiting one is cancelled: it ends at once, and is never sent.
    handles[PARALLEL_UPLOADS]!.cancel();
    await expect(handles[PARALLEL_UPLOADS]!.done).rejects.toThrow(/cancelled/);
    // One ends (well or not): the next waiting one starts.
    FakeXhr.all[0]!.finish(201);
    await expect(handles[0]!.done).resolves.toMatchObject({ status: 201 });
    expect(FakeXhr.all[PARALLEL_UPLOADS]!.sent).toBe(false);
    expect(FakeXhr.all[PARALLEL_UPLOADS + 1]!.sent).toBe(true);
    FakeXhr.all[1]!.abort();
    await expect(handles[1]!.done).rejects.toThrow(/cancelled/);
    expect(FakeXhr.all[PARALLEL_UPLOADS + 2]!.sent).toBe(true);
    expect(sent()).toBe(PARALLEL_UPLOADS + 2);
    for (const x of FakeXhr.all) if (x.sent && !x.aborted) x.finish();
    await Promise.allSettled(handles.map((h) => h.done));
    // All places are free again.
    const next = Array.from({ length: PARALLEL_UPLOADS }, (_, i) => uploadFile('ws', `g${i}`, new Blob(['x']), () => undefined));
    expect(FakeXhr.all.slice(-PARALLEL_UPLOADS).every((x) => x.sent)).toBe(true);
    for (const x of FakeXhr.all.slice(-PARALLEL_UPLOADS)) x.finish();
    await Promise.all(next.map((h) => h.done));
  });
});
