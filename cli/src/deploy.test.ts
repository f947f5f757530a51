// deploy/: what can be checked without a Docker engine or a Kubernetes cluster (issue 18). The
// compose file and the manifests are parsed (yaml), their references checked against each other
// and against the code (component names, settings), the manifests validated against the
// Kubernetes API schemas (kubernetes-models), and the secrets script run for real.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { components } from './components.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const deploy = join(root, 'deploy');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
/** Every setting the README's table documents (and the ones of the images it names). */
const documented = (name: string) =>
  readme.includes(`\`${name}\``) || ['POSTGRES_USER', 'POSTGRES_DB', 'POSTGRES_PASSWORD', 'MINIO_ROOT_USER', 'MINIO_ROOT_PASSWORD'].includes(name);

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string | string[];
  ports?: string[];
  env_file?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  restart?: string;
  healthcheck?: { test?: string[]; disable?: boolean };
}

describe('deploy/compose.yaml', () => {
  const compose = parse(readFileSync(join(deploy, 'compose.yaml'), 'utf8'), { merge: true }) as {
    services: Record<string, ComposeService>;
    volumes: Record<string, unknown>;
  };
  const services = compose.services;
  const ours = Object.entries(services).filter(([, s]) => s.image === 'codeagent:latest');

  it('runs every component from the one image, with two backends and two workers, and migrations once', () => {
    const commands = ours.map(([, s]) => String(s.command));
    for (const c of commands) expect([...Object.keys(components), 'migrate'], c).toContain(c);
    expect(commands.filter((c) => c === 'backend')).toHaveLength(2);
    expect((services.worker as { deploy?: { replicas: number } }).deploy?.replicas).toBe(2);
    expect(commands).toEqual(expect.arrayContaining(['gateway', 'runtime', 'worker', 'cluster-admin', 'bridge', 'migrate']));
    expect(services.migrate!.restart).toBe('no');
    // Every component waits for the one-shot migration to have succeeded.
    for (const [name, s] of ours.filter(([n]) => n !== 'migrate')) expect(s.depends_on?.migrate?.condition, name).toBe('service_completed_successfully');
    expect(services['backend-a']!.environment!.BACKEND_URL).toBe('http://backend-a:8091,http://backend-b:8091');
  });

  it('publishes only the gateway', () => {
    expect(
      Object.entries(services)
        .filter(([, s]) => s.ports !== undefined)
        .map(([n]) => n),
    ).toEqual(['gateway']);
  });

  it('names only services and volumes that exist, and settings the README documents', () => {
    for (const [name, s] of Object.entries(services)) {
      for (const dep of Object.keys(s.depends_on ?? {})) expect(Object.keys(services), `${name} depends on ${dep}`).toContain(dep);
      for (const v of ((s as { volumes?: string[] }).volumes ?? []).map((m) => m.split(':')[0]!))
        expect(Object.keys(compose.volumes), `${name}: volume ${v}`).toContain(v);
      for (const key of Object.keys(s.environment ?? {})) expect(documented(key), `${name}: ${key} is not in the README's settings`).toBe(true);
    }
    for (const [, s] of ours) expect(s.build).toEqual({ context: '..', dockerfile: 'deploy/Dockerfile' });
  });

  it('keeps every secret in the env file: none in compose.yaml, the example lists each, make-env.sh makes each', () => {
    const text = readFileSync(join(deploy, 'compose.yaml'), 'utf8');
    const secrets = [
      'POSTGRES_PASSWORD',
      'DATABASE_URL',
      'MINIO_ROOT_PASSWORD',
      'S3_SECRET_ACCESS_KEY',
      'INTERNAL_SERVICE_TOKEN',
      'JWT_SECRET',
      'ADMIN_TOKENS',
      'SECRETS_KEY',
      'AGENT_TOKEN',
      'BOOTSTRAP_ADMIN_PASSWORD',
    ];
    for (const name of secrets) expect(text, name).not.toMatch(new RegExp(`^\\s*${name}:`, 'm'));
    for (const [name, s] of Object.entries(services).filter(([n]) => n !== 'postgres' || true)) {
      if (s.image === 'codeagent:latest' || name === 'postgres' || name === 'minio') expect(s.env_file, name).toEqual(['codeagent.env']);
    }
    const keys = (env: string) =>
      env
        .split('\n')
        .filter((l) => /^[A-Z0-9_]+=/.test(l))
        .map((l) => l.split('=')[0]!);
    const example = keys(readFileSync(join(deploy, 'codeagent.env.example'), 'utf8'));
    expect(example).toEqual(expect.arrayContaining(secrets));
    for (const key of example) expect(documented(key), key).toBe(true);

    // The script for real: fresh values, mode 0600, the same keys, and it never overwrites.
    const dir = mkdtempSync(join(tmpdir(), 'codeagent-make-env-'));
    copyFileSync(join(deploy, 'make-env.sh'), join(dir, 'make-env.sh'));
    execFileSync('bash', [join(dir, 'make-env.sh'), 'ops@example.com'], { stdio: 'pipe' });
    const made = readFileSync(join(dir, 'codeagent.env'), 'utf8');
    expect(keys(made)).toEqual(example);
    expect(statSync(join(dir, 'codeagent.env')).mode & 0o777).toBe(0o600);
    expect(made).not.toContain('change-me');
    const value = (k: string) => new RegExp(`^${k}=(.*)$`, 'm').exec(made)![1]!;
    expect(Buffer.from(value('SECRETS_KEY'), 'base64')).toHaveLength(32);
    expect(Buffer.byteLength(value('JWT_SECRET'))).toBeGreaterThanOrEqual(32);
    expect(value('DATABASE_URL')).toBe(`postgres://codeagent:${value('POSTGRES_PASSWORD')}@postgres:5432/codeagent`);
    expect(value('S3_SECRET_ACCESS_KEY')).toBe(value('MINIO_ROOT_PASSWORD'));
    expect(() => execFileSync('bash', [join(dir, 'make-env.sh')], { stdio: 'pipe' })).toThrow();
    expect(readFileSync(join(dir, 'codeagent.env'), 'utf8')).toBe(made);
  });
});

describe('deploy/Dockerfile', () => {
  const text = readFileSync(join(deploy, 'Dockerfile'), 'utf8');
  const lines = text.split('\n').filter((l) => !l.startsWith('#'));

  it('builds in stages on Node 24, runs as a user that is not root, with a health check', () => {
    const from = lines.filter((l) => l.startsWith('FROM '));
    expect(from.length).toBeGreaterThanOrEqual(2);
    for (const f of from) expect(f).toMatch(/^FROM node:24-/);
    expect(lines.some((l) => l.startsWith('COPY --from=build'))).toBe(true);
    const user = lines.filter((l) => l.startsWith('USER ')).at(-1);
    expect(user).toBeDefined();
    expect(user).not.toMatch(/USER (root|0)\b/);
    expect(lines.find((l) => l.startsWith('HEALTHCHECK'))).toMatch(/"healthcheck"\]$/);
    expect(lines.find((l) => l.startsWith('ENTRYPOINT'))).toBe('ENTRYPOINT ["node", "/app/cli/dist/index.js"]');
  });
});

/** What every Kubernetes manifest has (kubernetes-models validates the whole document). */
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
}
interface Container {
  args: string[];
  livenessProbe: { httpGet: { path: string } };
  readinessProbe: { httpGet: { path: string } };
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  securityContext: Record<string, unknown>;
  envFrom: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
}
interface PodSpec {
  containers: Container[];
  securityContext: { runAsNonRoot?: boolean };
  automountServiceAccountToken?: boolean;
}
/** The fields of each kind that these tests read. */
interface Kinds {
  Deployment: { spec: { replicas: number; strategy: { type: string }; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } } };
  Pod: { spec: PodSpec };
  Service: { spec: { selector: Record<string, string> } };
  Ingress: { spec: { rules: { http: { paths: { backend: { service: { name: string } } }[] } }[] } };
  NetworkPolicy: { spec: { policyTypes: string[]; egress: unknown[] } };
  ConfigMap: { data: Record<string, string> };
  Secret: { stringData: Record<string, string> };
}

describe('deploy/kubernetes', () => {
  const dir = join(deploy, 'kubernetes');
  const manifests = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((d) => ({ file: f, doc: d.toJS() as Manifest })));
  const of = <K extends keyof Kinds>(kind: K) => manifests.filter((m) => m.doc.kind === kind).map((m) => m.doc as Manifest & Kinds[K]);

  it('validates every manifest against the Kubernetes API schemas (kubernetes-models)', async () => {
    expect(manifests.length).toBeGreaterThan(15);
    for (const { file, doc } of manifests) {
      const [group, version] = doc.apiVersion.includes('/') ? doc.apiVersion.split('/') : [undefined, doc.apiVersion];
      const module = `kubernetes-models/${group ? `${group}/` : ''}${version}/${doc.kind}`;
      const models = (await import(module)) as Record<string, new (data: unknown) => { validate(): void }>;
      const Model = models[doc.kind]!;
      expect(() => new Model(doc).validate(), `${file}: ${doc.kind} ${doc.metadata.name}`).not.toThrow();
    }
  });

  it('maps each component to a Deployment with probes, resources and a restricted security context', () => {
    const deployments = of('Deployment');
    const names = deployments.map((d) => d.metadata.name).sort();
    expect(names).toEqual(['backend', 'bridge', 'cluster-admin', 'gateway', 'runtime', 'worker']);
    for (const d of deployments) {
      const pod = d.spec.template.spec;
      const c = pod.containers[0]!;
      expect(Object.keys(components), d.metadata.name).toContain(c.args[0]);
      expect(c.livenessProbe.httpGet.path).toBe('/livez');
      expect(c.readinessProbe.httpGet.path).toBe('/readyz');
      expect(c.resources.requests.memory).toBeDefined();
      expect(c.resources.limits.memory).toBeDefined();
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
      expect(c.envFrom.map((e) => e.configMapRef?.name ?? e.secretRef?.name)).toEqual(['codeagent-settings', 'codeagent-secrets']);
    }
    // The runtime is one instance, replaced (never two side by side); the others scale.
    const runtime = deployments.find((d) => d.metadata.name === 'runtime')!;
    expect(runtime.spec.replicas).toBe(1);
    expect(runtime.spec.strategy.type).toBe('Recreate');
    for (const d of deployments.filter((x) => x.metadata.name !== 'runtime')) expect(d.spec.replicas, d.metadata.name).toBeGreaterThanOrEqual(2);
  });

  it('references only what exists: config, secret, services, selectors, the ingress backend', () => {
    const configMaps = of('ConfigMap').map((c) => c.metadata.name);
    const secrets = of('Secret').map((s) => s.metadata.name);
    expect(configMaps).toContain('codeagent-settings');
    expect(secrets).toContain('codeagent-secrets');
    for (const key of Object.keys(of('ConfigMap')[0]!.data)) expect(documented(key), key).toBe(true);
    for (const key of Object.keys(of('Secret')[0]!.stringData)) expect(documented(key), key).toBe(true);
    const podLabels = of('Deployment').map((d) => d.spec.template.metadata.labels);
    for (const s of of('Service'))
      expect(
        podLabels.some((l) => Object.entries(s.spec.selector).every(([k, v]) => l[k] === v)),
        s.metadata.name,
      ).toBe(true);
    const serviceNames = of('Service').map((s) => s.metadata.name);
    for (const ing of of('Ingress')) for (const rule of ing.spec.rules) for (const p of rule.http.paths) expect(serviceNames).toContain(p.backend.service.name);
    // Each component's URL in the settings names its Service.
    const settings = of('ConfigMap')[0]!.data;
    for (const key of ['BACKEND_URL', 'RUNTIME_URL', 'CLUSTER_ADMIN_URL', 'BRIDGE_URL']) expect(serviceNames, key).toContain(new URL(settings[key]!).hostname);
  });

  it('isolates sandbox pods: no token, no egress, restricted, limited', () => {
    const pod = of('Pod').find((p) => p.metadata.labels?.['app.kubernetes.io/component'] === 'sandbox')!;
    expect(pod.spec.automountServiceAccountToken).toBe(false);
    expect(pod.spec.securityContext.runAsNonRoot).toBe(true);
    expect(pod.spec.containers[0]!.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(pod.spec.containers[0]!.resources.limits).toMatchObject({ cpu: expect.anything() as unknown, memory: expect.anything() as unknown });
    const policy = of('NetworkPolicy').find((n) => n.metadata.namespace === pod.metadata.namespace)!;
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy.spec.egress).toEqual([]);
  });
});
