import { readFileSync } from 'node:fs';

/**
 * The runtime's own Python modules for the Jupyter servers it starts (services/runtime/python),
 * and how to hand them to a server: the files (by content, so no host path is shared with a
 * sandbox), the PYTHONPATH entry that holds them, and the server options that load them.
 * - codeagent_nodelay: TCP no-delay on kernel websockets (decision 0080), a server extension.
 * - codeagent_contents: the contents manager whose chunked uploads are one write (decision 0219).
 */
export const NODELAY_MODULE = 'codeagent_nodelay';
export const CONTENTS_MODULE = 'codeagent_contents';
const MODULES = [NODELAY_MODULE, CONTENTS_MODULE];
const sources = new Map<string, string>();

export interface ServerModules {
  files: Record<string, string>;
  pythonPath: string;
  /** Loads the no-delay extension (the lab host's main.py imports it itself). */
  extensionArgs: string[];
  /** The contents manager, for every server. */
  contentsArgs: string[];
}

export function serverModules(runDir: string): ServerModules {
  const files: Record<string, string> = {};
  for (const name of MODULES) {
    if (!sources.has(name)) sources.set(name, readFileSync(new URL(`../python/${name}.py`, import.meta.url), 'utf8'));
    files[`ext/${name}.py`] = sources.get(name)!;
  }
  return {
    files,
    pythonPath: `${runDir}/ext`,
    extensionArgs: [`--ServerApp.jpserver_extensions=${NODELAY_MODULE}=True`],
    contentsArgs: [`--ServerApp.contents_manager_class=${CONTENTS_MODULE}.OneWriteFileManager`],
  };
}
