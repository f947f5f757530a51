/**
 * Test fixture (not used in production): writes a slow, never-ending object with the local
 * backend so that a test can SIGKILL the process in the middle. argv: base dir, key.
 */
import { Readable } from 'node:stream';
import { LocalObjectStore } from './local.js';

const [base, key] = process.argv.slice(2) as [string, string];
const store = new LocalObjectStore(base);
await store.init();
let sent = 0;
const slow = new Readable({
  read() {
    sent += 1;
    if (sent === 20) process.stdout.write('writing\n');
    setTimeout(() => this.push(Buffer.alloc(64 * 1024, 7)), 5);
  },
});
await store.put('workspace', key, slow);
