import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { descendants, snapshot, stillRunning, waitEnded } from './proc.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('processes seen before a stop, and their end', () => {
  it('a process runs until it is killed; waitEnded returns once it has ended', async () => {
    const child = spawn('sleep', ['30']);
    const [ref] = snapshot([child.pid!]);
    expect(ref).toBeDefined();
    expect(stillRunning(ref!)).toBe(true);
    expect(await waitEnded([ref!], 200)).toEqual([ref]); // still running after the bound
    child.kill('SIGKILL');
    expect(await waitEnded([ref!], 5000)).toEqual([]);
  });

  it('a zombie has ended (it only waits for its reaper), and so has a pid now held by a later process', async () => {
    // `sleep 0.1` exits and stays a zombie: its parent (exec'd into `sleep 30`) never reaps it.
    const parent = spawn('sh', ['-c', 'sleep 0.1 & exec sleep 30']);
    await sleep(50);
    const [zombie] = snapshot(descendants(parent.pid!));
    expect(zombie).toBeDefined();
    await sleep(300);
    expect(existsSync(`/proc/${zombie!.pid}`)).toBe(true);
    expect(stillRunning(zombie!)).toBe(false);
    const [me] = snapshot([parent.pid!]);
    expect(stillRunning({ pid: me!.pid, started: `${me!.started}1` })).toBe(false);
    parent.kill('SIGKILL');
  });

  it('leaves out what is already gone', () => {
    expect(snapshot([2 ** 22 + 1])).toEqual([]);
  });
});
