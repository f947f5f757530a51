import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '@codeagent/config';

const HOST_DIR = fileURLToPath(new URL('../../extensions/lab-host/', import.meta.url));
const LABEXTENSIONS = fileURLToPath(new URL('../../extensions/jupyterlab-codeagent-bridge/labextension/', import.meta.url));
// The interpreter must see Debian's jupyter_server and jupyterlab_server (as for the runtime).
const PYTHON = process.env.JUPYTER_PYTHON ?? '/usr/bin/python3';

/** Why the JupyterLab host cannot start here, or null when it can. */
export function jupyterlabMissing(): string | null {
  if (!existsSync(join(HOST_DIR, 'build', 'static', 'index.html'))) return 'the JupyterLab host is not built: run `node extensions/build.mjs`';
  if (!existsSync(PYTHON)) return `${PYTHON} is missing: install python3 and the Jupyter packages (scripts/system-deps.sh kernels)`;
  return null;
}

/**
 * `codeagent jupyterlab`: the JupyterLab host (Debian's jupyter_server + jupyterlab_server) on
 * 127.0.0.1:JUPYTERLAB_PORT under `/jupyter/`, with the Jupyter token the gateway injects, notebooks
 * in DATA_DIR/notebooks. Resolves once it answers; exits with the server; SIGTERM stops it.
 */
export async function startJupyterlab(config: Config): Promise<string> {
  const missing = jupyterlabMissing();
  if (missing) throw new Error(missing);
  const notebooks = join(config.dataDir, 'notebooks');
  mkdirSync(notebooks, { recursive: true });
  const child = spawn(
    PYTHON,
    [
      join(HOST_DIR, 'main.py'),
      '--ServerApp.ip=127.0.0.1',
      `--ServerApp.port=${config.jupyterlabPort}`,
      '--ServerApp.port_retries=0',
      '--ServerApp.open_browser=False',
      '--ServerApp.base_url=/jupyter/',
      `--ServerApp.root_dir=${notebooks}`,
      `--LabServerApp.extra_labextensions_path=${LABEXTENSIONS}`,
      ...(process.getuid?.() === 0 ? ['--allow-root'] : []),
    ],
    {
      // The token goes through the environment, not the command line (visible in `ps`).
      env: { ...process.env, JUPYTER_TOKEN: config.jupyterlab.token, PYDEVD_DISABLE_FILE_VALIDATION: '1', CODEAGENT_LAB_STATE_DIR: join(config.dataDir, 'jupyterlab') },
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  const stop = () => child.kill('SIGTERM');
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  child.once('exit', (code, signal) => process.exit(code ?? (signal === 'SIGTERM' ? 0 : 1)));

  const url = `http://127.0.0.1:${config.jupyterlabPort}/jupyter/`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && child.exitCode === null) {
    try {
      const res = await fetch(`${url}api/status`, { headers: { authorization: `token ${config.jupyterlab.token}` } });
      if (res.ok) return url;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`JupyterLab did not answer at ${url} within 60 s`);
}
