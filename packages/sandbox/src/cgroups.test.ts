import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Cgroup, detectCgroups } from './cgroups.js';
import { checkUidRange, memoryUidAllocator, etcFiles } from './identity.js';

const files = (map: Record<string, string>) => (p: string) => map[p];

describe('detectCgroups', () => {
  it('finds v1 controllers below this process’s own cgroup (hybrid layout of this machine)', () => {
    const support = detectCgroups({
      procSelfCgroup: '8:pids:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n',
      mountinfo: [
        '30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
        '31 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
        '32 25 0:28 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
        '33 25 0:29 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
      ].join('\n'),
      readFile: files({ '/sys/fs/cgroup/unified/cgroup.controllers': 'hugetlb\n' }),
    });
    expect(support.controllers).toEqual({
      memory: { version: 1, dir: '/sys/fs/cgroup/memory/process_api/abc' },
      pids: { version: 1, dir: '/sys/fs/cgroup/pids' },
      cpu: { version: 1, dir: '/sys/fs/cgroup/cpu' },
    });
  });

  it('handles co-mounted v1 controllers and a container’s mount root', () => {
    const support = detectCgroups({
      procSelfCgroup: '3:cpu,cpuacct:/docker/ctr\n2:memory:/docker/ctr\n1:pids:/docker/ctr\n',
      mountinfo: [
        '40 35 0:30 /docker/ctr /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct',
        '41 35 0:31 /docker/ctr /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory',
        '42 35 0:32 /docker/ctr /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids',
      ].join('\n'),
      readFile: files({}),
    });
    expect(support.controllers.cpu).toEqual({ version: 1, dir: '/sys/fs/cgroup/cpu,cpuacct' });
    expect(support.controllers.memory).toEqual({ version: 1, dir: '/sys/fs/cgroup/memory' });
  });

  it('uses the unified hierarchy on a v2 host when the controllers are delegated, and says why not otherwise', () => {
    const input = {
      procSelfCgroup: '0::/system.slice/codeagent.service\n',
      mountinfo: '25 1 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw',
    };
    const ok = detectCgroups({
      ...input,
      readFile: files({ '/sys/fs/cgroup/system.slice/codeagent.service/cgroup.controllers': 'cpuset cpu io memory pids\n' }),
    });
    expect(ok.controllers.memory).toEqual({ version: 2, dir: '/sys/fs/cgroup/system.slice/codeagent.service' });
    expect(ok.problems).toEqual([]);
    const partial = detectCgroups({ ...input, readFile: files({ '/sys/fs/cgroup/system.slice/codeagent.service/cgroup.controllers': 'memory\n' }) });
    expect(partial.controllers.pids).toBeUndefined();
    expect(partial.problems.join()).toMatch(/pids is not delegated/);
    const parent = detectCgroups({
      ...input,
      v2Parent: 'codeagent.slice/sandboxes',
      readFile: files({ '/sys/fs/cgroup/codeagent.slice/sandboxes/cgroup.controllers': 'cpu memory pids' }),
    });
    expect(parent.controllers.cpu).toEqual({ version: 2, dir: '/sys/fs/cgroup/codeagent.slice/sandboxes' });
  });

  it('reports no controllers on a host without cgroups', () => {
    const none = detectCgroups({ procSelfCgroup: '', mountinfo: '', readFile: files({}) });
    expect(none.controllers).toEqual({});
    expect(none.problems).toHaveLength(3);
  });
});

describe('Cgroup limits (written to a directory shaped like the cgroup file system)', () => {
  const fake = () => {
    const root = mkdtempSync(join(tmpdir(), 'codeagent-cgfake-'));
    for (const d of ['v1mem', 'v1pids', 'v1cpu', 'v2']) mkdirSync(join(root, d));
    writeFileSync(join(root, 'v2', 'cgroup.controllers'), 'cpu memory pids');
    return root;
  };

  it('writes v1 files: memory (and memsw), pids.max, the CFS quota', () => {
    const root = fake();
    const g = new Cgroup(
      new Map([
        ['memory', { version: 1 as const, dir: join(root, 'v1mem') }],
        ['pids', { version: 1 as const, dir: join(root, 'v1pids') }],
        ['cpu', { version: 1 as const, dir: join(root, 'v1cpu') }],
      ]),
    ).child('ws-1');
    mkdirSync(join(root, 'v1mem', 'ws-1'));
    writeFileSync(join(root, 'v1mem', 'ws-1', 'memory.memsw.limit_in_bytes'), '');
    g.create({ memoryBytes: 512 * 1024 * 1024, pids: 128, cpus: 1.5 });
    expect(readFileSync(join(root, 'v1mem/ws-1/memory.limit_in_bytes'), 'utf8')).toBe(String(512 * 1024 * 1024));
    expect(readFileSync(join(root, 'v1mem/ws-1/memory.memsw.limit_in_bytes'), 'utf8')).toBe(String(512 * 1024 * 1024));
    expect(readFileSync(join(root, 'v1pids/ws-1/pids.max'), 'utf8')).toBe('128');
    expect(readFileSync(join(root, 'v1cpu/ws-1/cpu.cfs_quota_us'), 'utf8')).toBe('150000');
    expect(g.procsFiles()).toEqual([join(root, 'v1mem/ws-1/cgroup.procs'), join(root, 'v1pids/ws-1/cgroup.procs'), join(root, 'v1cpu/ws-1/cgroup.procs')]);
  });

  it('writes v2 files, delegates the controllers to children, and reads hierarchical events', () => {
    const root = fake();
    const dir = join(root, 'v2');
    const g = new Cgroup(
      new Map([
        ['memory', { version: 2 as const, dir }],
        ['pids', { version: 2 as const, dir }],
        ['cpu', { version: 2 as const, dir }],
      ]),
    ).child('ws-2');
    mkdirSync(join(dir, 'ws-2'));
    writeFileSync(join(dir, 'ws-2', 'cgroup.controllers'), 'cpu memory pids');
    writeFileSync(join(dir, 'ws-2', 'memory.swap.max'), '');
    g.create({ memoryBytes: 1024, pids: 7, cpus: 0.5 }, true);
    expect(readFileSync(join(dir, 'ws-2/memory.max'), 'utf8')).toBe('1024');
    expect(readFileSync(join(dir, 'ws-2/memory.swap.max'), 'utf8')).toBe('0');
    expect(readFileSync(join(dir, 'ws-2/pids.max'), 'utf8')).toBe('7');
    expect(readFileSync(join(dir, 'ws-2/cpu.max'), 'utf8')).toBe('50000 100000');
    expect(readFileSync(join(dir, 'ws-2/cgroup.subtree_control'), 'utf8')).toBe('+memory +pids +cpu');
    expect(g.procsFiles()).toEqual([join(dir, 'ws-2/cgroup.procs')]);
    writeFileSync(join(dir, 'ws-2/memory.events'), 'low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n');
    writeFileSync(join(dir, 'ws-2/pids.events'), 'max 3\n');
    expect(g.events()).toEqual({ oomKills: 1, pidsLimitHits: 3 });
  });

  it('refuses a child name that is a path', () => {
    const g = new Cgroup(new Map([['pids', { version: 1 as const, dir: '/x' }]]));
    expect(() => g.child('../../etc')).toThrow(/invalid cgroup name/);
    expect(existsSync('/x')).toBe(false);
  });
});

describe('sandbox identities', () => {
  const none = {
    passwd: 'root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/bash\n',
    group: 'root:x:0:\n',
    subuid: 'alice:100000:65536\n',
    subgid: '',
  };

  it('accepts a uid range no real user, group or subordinate range touches', () => {
    expect(() => checkUidRange(1_900_000_000, none)).not.toThrow();
  });

  it('refuses a range holding a real user, a group, a subordinate range, or root-ish ids', () => {
    expect(() => checkUidRange(1_900_000_000, { ...none, passwd: none.passwd + 'svc:x:1900000005:10::/:/bin/false\n' })).toThrow(/user id 1900000005/);
    expect(() => checkUidRange(1_900_000_000, { ...none, group: 'g:x:1900000009:\n' })).toThrow(/group id 1900000009/);
    expect(() => checkUidRange(100_000, none)).toThrow(/subordinate uid range starting at 100000/);
    expect(() => checkUidRange(0, none)).toThrow(/outside/);
    expect(() => checkUidRange(2_100_000_000, none)).toThrow(/outside/);
  });

  it('gives each workspace its own stable uid above the scratch uid', async () => {
    const alloc = memoryUidAllocator(5_000_000);
    const a = await alloc.uidFor('a');
    const b = await alloc.uidFor('b');
    expect(a).toBe(5_000_001);
    expect(b).toBe(5_000_002);
    expect(await alloc.uidFor('a')).toBe(a);
  });

  it('generates passwd and group for the sandbox user only', () => {
    const etc = etcFiles(1_900_000_003, 1_900_000_003, '/workspace');
    expect(etc['/etc/passwd']).toBe(
      'user:x:1900000003:1900000003:sandbox user:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n',
    );
    expect(etc['/etc/passwd']).not.toMatch(/^root:/m);
    expect(etc['/etc/hosts']).not.toMatch(/\d+\.\d+\.\d+\.\d+\s+(?!localhost)/);
  });
});
