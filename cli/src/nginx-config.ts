import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from '@codeagent/config';

/** `codeagent nginx-config --help`: what it does and how to run nginx with it. */
export const NGINX_CONFIG_HELP = `
Renders the gateway's route table as an nginx configuration that does what the gateway does, for
the same settings. Run it with
  nginx -p DIR -c FILE -e stderr -g 'daemon off;'`;

export interface NginxConfigOptions {
  /** Write there (mode 0600: the file holds JUPYTERLAB_TOKEN) instead of stdout. */
  output?: string;
  runDir?: string;
  /** A path, or "off". */
  accessLog?: string;
  httpOnly?: boolean;
}

/** `codeagent nginx-config`: the nginx equivalent of the gateway (issue 18, decision 0060). */
export async function nginxConfig(config: Config, options: NginxConfigOptions): Promise<number> {
  if (config.labOrigins !== undefined) {
    // (Decision 0263: the tickets, passes and host rules of lab hosts are the gateway's.)
    console.error(
      'codeagent: LAB_ORIGIN (a host of its own for each workspace lab) is served by the gateway only; the nginx ingress does not have it. ' +
        'Unset LAB_ORIGIN, or run the gateway behind your proxy (TRUSTED_PROXIES) for the lab hosts.',
    );
    return 2;
  }
  const opts = {
    output: options.output === undefined ? undefined : resolve(options.output),
    runDir: options.runDir === undefined ? undefined : resolve(options.runDir),
    accessLog: options.accessLog === 'off' ? (false as const) : options.accessLog,
    httpOnly: options.httpOnly === true,
  };
  const { defaultWebRoot, renderNginxConfig } = await import('@codeagent/gateway');
  const text = renderNginxConfig({
    listen: { host: config.host, port: config.port },
    upstreams: { backend: config.backendUrls, clusterAdmin: config.clusterAdminUrls, bridge: config.bridgeUrls, jupyter: config.jupyterlab.urls },
    jupyterToken: config.jupyterlab.token,
    jupyterPerWorkspace: !config.jupyterlab.shared,
    trustedProxies: config.trustedProxies,
    maxUploadBytes: config.maxUploadBytes,
    runDir: opts.runDir ?? resolve(config.dataDir, 'nginx'),
    ...(opts.accessLog !== undefined ? { accessLog: opts.accessLog } : {}),
    httpOnly: opts.httpOnly,
    // The built web app of this checkout (`node web/build.mjs`), served as the gateway serves it.
    webRoot: defaultWebRoot(),
  });
  if (opts.output) {
    writeFileSync(opts.output, text, { mode: 0o600 });
    console.error(`codeagent: wrote ${opts.output} (it holds JUPYTERLAB_TOKEN: keep it private)`);
  } else {
    process.stdout.write(text);
  }
  return 0;
}
