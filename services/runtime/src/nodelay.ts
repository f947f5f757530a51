import { readFileSync } from 'node:fs';

/**
 * The Jupyter server extension that sets TCP no-delay on kernel websockets
 * (python/codeagent_nodelay.py, docs/decisions/0080-kernel-websocket-nodelay.md), and how to
 * hand it to a Jupyter server: the file (by content, so no host path is shared with a sandbox),
 * the PYTHONPATH entry that holds it, and the server option that loads it.
 */
export const NODELAY_MODULE = 'codeagent_nodelay';
const FILE = `ext/${NODELAY_MODULE}.py`;
let source: string | undefined;

export function nodelayExtension(runDir: string): { files: Record<string, string>; pythonPath: string; args: string[] } {
  source ??= readFileSync(new URL(`../python/${NODELAY_MODULE}.py`, import.meta.url), 'utf8');
  return { files: { [FILE]: source }, pythonPath: `${runDir}/ext`, args: [`--ServerApp.jpserver_extensions=${NODELAY_MODULE}=True`] };
}
