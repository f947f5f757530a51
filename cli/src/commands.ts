import { Command, Option } from 'commander';
import { loadConfig } from '@codeagent/config';
import { COMMON_SETTINGS, components, READY_MESSAGE, STORAGE_SETTINGS, SUPERVISED_ENV, type ComponentName } from './components.js';
import { healthcheck } from './healthcheck.js';
import { NGINX_CONFIG_HELP, nginxConfig, type NginxConfigOptions } from './nginx-config.js';
import { settleOnceAfterStart } from './settle.js';

/** `--help` of a command ends with the settings it reads; nothing is read or started to print it. */
function settingsHelp(settings: readonly string[]): string {
  const names = [...new Set([...settings, ...COMMON_SETTINGS])];
  const lines: string[] = [];
  let line = ' ';
  for (const name of names) {
    if (line.length + name.length > 96) {
      lines.push(line.replace(/,$/, ','));
      line = ' ';
    }
    line += ` ${name},`;
  }
  lines.push(line.replace(/,$/, ''));
  return `\nSettings it reads (environment variables, described in README.md under "Settings"):\n${lines.join('\n')}`;
}

/**
 * A component started by `codeagent start` leads its own process group. When the supervisor
 * goes away (its IPC channel closes, even when it was killed with SIGKILL), the component
 * sends SIGTERM to its whole group: itself (a graceful stop once its handler is installed) and
 * whatever it started (the runtime's Jupyter server), so nothing outlives the supervisor.
 */
function watchSupervisor(): void {
  if (!process.send) return;
  process.once('disconnect', () => {
    try {
      process.kill(process.env[SUPERVISED_ENV] === '1' ? -process.pid : process.pid, 'SIGTERM');
    } catch {
      process.kill(process.pid, 'SIGTERM');
    }
  });
}

/**
 * The one definition of the `codeagent` commands. An action resolves to the exit code, or -1
 * for a component that keeps running until a signal. `--help`/`-h` and `help <command>` are
 * answered by commander before any action runs, so they read no setting and start nothing;
 * the code of a command (database, storage, services) is imported only when it runs.
 */
export function cliProgram(): { program: Command; exitCode: () => number } {
  let code = 0;
  const program = new Command('codeagent')
    .description('The codeagent platform. Settings come from environment variables; see README.md.')
    .showHelpAfterError('(codeagent --help lists the commands; codeagent <command> --help explains one)')
    .helpCommand('help [command]', 'show the help of a command')
    // Help and usage errors become a CommanderError (exit code 0, or 2 for a wrong command line)
    // instead of a process.exit: set before the commands, which inherit it.
    .exitOverride();

  program
    .command('start')
    .description('start the whole platform on this machine (embedded defaults), supervised')
    .addHelpText(
      'after',
      settingsHelp([
        'HOST',
        'PORT',
        'BACKEND_PORT',
        'RUNTIME_PORT',
        'CLUSTER_ADMIN_PORT',
        'BRIDGE_PORT',
        'DATABASE_URL',
        ...STORAGE_SETTINGS,
        'BOOTSTRAP_ADMIN_EMAIL',
        'BOOTSTRAP_ADMIN_PASSWORD',
      ]) + '\n  and every setting of the components it starts (codeagent <component> --help)',
    )
    .action(async () => {
      code = await (await import('./supervisor.js')).superviseAll();
    });

  for (const [name, component] of Object.entries(components)) {
    program
      .command(name)
      .description(component.description)
      .addHelpText('after', settingsHelp(component.settings))
      .action(async () => {
        watchSupervisor();
        const config = loadConfig();
        await components[name as ComponentName].start(config);
        process.send?.(READY_MESSAGE);
        // Once serving, the heap of the start is given back (decision 0085).
        settleOnceAfterStart();
        code = -1; // keeps running until a signal
      });
  }

  program
    .command('migrate')
    .description('apply database migrations and exit')
    .addHelpText('after', settingsHelp(['DATABASE_URL']))
    .action(async () => {
      code = await (await import('./migrate.js')).runMigrations(loadConfig());
    });

  program
    .command('healthcheck')
    .description("exit 0 when the component (default: the container's) answers /livez")
    .argument('[component]', `one of ${Object.keys(components).join(', ')}`)
    .addHelpText(
      'after',
      settingsHelp([
        'PORT',
        'BACKEND_PORT',
        'RUNTIME_PORT',
        'CLUSTER_ADMIN_PORT',
        'BRIDGE_PORT',
        'JUPYTERLAB_PORT',
        'GATEWAY_METRICS_PORT',
        'WORKER_METRICS_PORT',
      ]),
    )
    .action(async (component: string | undefined) => {
      code = await healthcheck(loadConfig(), Object.keys(components), component === undefined ? [] : [component]);
    });

  program
    .command('nginx-config')
    .description('print an nginx configuration equivalent to the gateway')
    .option('--output <file>', 'write there (mode 0600: the file holds JUPYTERLAB_TOKEN) instead of stdout')
    .option('--run-dir <dir>', 'pid file and temporary files (default DATA_DIR/nginx)')
    .addOption(new Option('--access-log <path>', 'access log path, or off (default RUN_DIR/access.log; /dev/stdout in a container)'))
    .option('--http-only', 'only the content of the http block, to include in an existing nginx.conf')
    .addHelpText(
      'after',
      NGINX_CONFIG_HELP +
        '\n' +
        settingsHelp([
          'HOST',
          'PORT',
          'BACKEND_URL',
          'CLUSTER_ADMIN_URL',
          'BRIDGE_URL',
          'JUPYTERLAB_URL',
          'JUPYTERLAB_TOKEN',
          'INTERNAL_SERVICE_TOKEN',
          'TRUSTED_PROXIES',
          'MAX_UPLOAD_BYTES',
        ]),
    )
    .action(async (options: NginxConfigOptions) => {
      code = await nginxConfig(loadConfig(), options);
    });

  program
    .command('import-pglite')
    .description('copy the data of the earlier embedded database (DATA_DIR/pgdata, PGlite) into PostgreSQL')
    .addHelpText('after', settingsHelp(['DATABASE_URL']))
    .action(async () => {
      code = await (await import('./import-pglite.js')).importPglite(loadConfig());
    });

  return { program, exitCode: () => code };
}
