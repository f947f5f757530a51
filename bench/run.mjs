// `npm run bench [name…]`: runs bench/<name>/index.mjs for each name (all when none is given).
import { spawnSync } from 'node:child_process';
import { readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const all = readdirSync(here, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(here, d.name, 'index.mjs')))
  .map((d) => d.name);
const wanted = process.argv.slice(2).length > 0 ? process.argv.slice(2) : all;
let failed = 0;
for (const name of wanted) {
  console.log(`\n=== bench/${name} ===`);
  const res = spawnSync(process.execPath, [join(here, name, 'index.mjs')], { stdio: 'inherit' });
  if (res.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);
