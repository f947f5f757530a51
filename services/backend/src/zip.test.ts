import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { describe, expect, it } from 'vitest';
import { ZipFile, javascriptCrc32, nodeCrc32, zipUsesNodeCrc32 } from './zip.js';

describe("the zip writer's CRC-32 (decision 0228)", () => {
  it('is Node’s in the module yazl calls', () => {
    expect(zipUsesNodeCrc32()).toBe(true);
  });

  it('gives the checksums of buffer-crc32, at once and running over chunks', () => {
    for (const size of [0, 1, 7, 64, 1000, 65_536 + 3]) {
      const data = randomBytes(size);
      expect(nodeCrc32(data)).toBe(javascriptCrc32(data));
      // Running: each chunk starts from the previous one's result, as yazl's stream watcher does.
      let running = 0;
      let reference = 0;
      for (let at = 0; at < size; at += 333) {
        running = nodeCrc32(data.subarray(at, at + 333), running);
        reference = javascriptCrc32(data.subarray(at, at + 333), reference);
      }
      expect(running).toBe(reference);
      expect(running).toBe(nodeCrc32(data));
    }
    // Anything but a buffer goes to the original (yazl passes none; its interface takes strings).
    expect(nodeCrc32('hello')).toBe(javascriptCrc32('hello'));
  });

  it('writes archives that another implementation checks (Python zipfile testzip)', async () => {
    const zip = new ZipFile();
    const big = randomBytes(3 * 1024 * 1024 + 17);
    zip.addReadStreamLazy('stored.bin', { size: big.length, compress: false }, (done) =>
      done(null, Readable.from([big.subarray(0, 1000), big.subarray(1000)])),
    );
    zip.addReadStreamLazy('text.csv', { compress: true }, (done) => done(null, Readable.from([Buffer.from('a,b\n1,2\n'.repeat(10_000))])));
    zip.end();
    const bytes = await buffer(zip.outputStream);
    const path = join(mkdtempSync(join(tmpdir(), 'codeagent-zip-')), 'x.zip');
    writeFileSync(path, bytes);
    // testzip reads every entry and compares its CRC-32 with the one written: None when all match.
    const out = execFileSync('python3', ['-c', 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(z.testzip(), sorted(z.namelist()))', path], {
      encoding: 'utf8',
    });
    expect(out.trim()).toBe("None ['stored.bin', 'text.csv']");
  });
});
