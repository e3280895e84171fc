import {
  GPUPoolModel,
  IServer,
  IStatus,
  IUse,
  clockWords,
  durationWords,
  gib,
  idleCell,
  idleLine,
  idleWords,
  percent,
  statusLabel,
  statusTitle,
  useLine,
  utilizationLine
} from '../src/model';
import { poolState, quotaWords, serverState } from '../src/panelwords';
import { ServerGoneError, goneAnswer } from '../src/stopped';

const STATUS: IStatus = {
  label: '2 \u00d7 A100-80G · training-pool',
  in_pool: true,
  pool: 'training-pool',
  platform: null,
  gpus: 2,
  gpu_type: 'A100-80G',
  over_quota: false,
  node: 'gpu-node-1',
  user: 'alice',
  server: ''
};

const POOLS = {
  pools: [
    {
      name: 'dev-pool',
      gpu_total: 4,
      gpu_available: 3,
      largest_free_block: 3,
      node_count: 1,
      schedulable_nodes: 1,
      quota: { managed: true, borrowing: true, within_quota: 0, available: 4 }
    }
  ]
};
const SERVERS = { servers: [{ name: '', this: true, ready: true, pool: 'training-pool' }] };

/** 2023-11-14 22:13:20 UTC, the server's clock in the tests (seconds). */
const NOW = 1_700_000_000;

/** `GET /gpupool/use` of a server measured at 45% (max 90%), not idle. */
const USE: IUse = {
  gpu_utilization: 45.0,
  gpu_utilization_max: 90.0,
  gpu_memory_used_mib: 31744,
  gpu_memory_total_mib: 163840,
  measured_at: NOW - 5,
  idle: null,
  source: 'dcgm',
  problem: null,
  error: null,
  now: NOW
};

/** Idle for 1h05m under `action: stop`, warned, stopped in 55m. */
const IDLE = { since: NOW - 3900, warned: true, stops_at: NOW + 3300, due_at: NOW + 3300, action: 'stop' };

/** A scripted `/gpupool/` server: answers by route, or fails while `failing` is set (`use`
 * alone while `useFailing` is). */
function scripted(status: IStatus = STATUS, use: IUse = USE) {
  const asked: string[] = [];
  const server = {
    asked,
    failing: false,
    useFailing: false,
    gone: false,
    status,
    use,
    fetch: async (route: string) => {
      asked.push(route);
      if (server.gone) {
        throw new ServerGoneError(404); // the hub's "not found" page: the server is gone
      }
      if (server.failing || (route === 'use' && server.useFailing)) {
        throw new Error('502: no answer from the gpupool service');
      }
      return { status: server.status, use: server.use, pools: POOLS, servers: SERVERS }[route];
    }
  };
  return server;
}

function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms));
}

describe('labels', () => {
  it('says the GPUs and the pool, or CPU', () => {
    expect(statusLabel(STATUS)).toBe('2 \u00d7 A100-80G · training-pool');
    expect(statusLabel({ ...STATUS, gpus: 0, pool: 'compute-pool' })).toBe('CPU · compute-pool');
    expect(statusLabel({ ...STATUS, gpu_type: null, gpus: 1 })).toBe('1 \u00d7 GPU · training-pool');
    expect(statusLabel({ ...STATUS, pool: null })).toBe('not in a GPU pool');
    expect(statusLabel(null)).toBe('GPU pool…');
  });

  it('says what the server has in the service\'s words, whole GPUs too', () => {
    const mig = {
      ...STATUS,
      gpus: 1,
      shape: 'mig-1g.10gb',
      shape_text: 'MIG 1g.10gb of an A100-80G',
      gpu_equivalents: '1/7'
    };
    expect(statusLabel(mig)).toBe('MIG 1g.10gb of an A100-80G · training-pool');
    const whole = { ...STATUS, shape: 'whole', shape_text: '2 \u00d7 A100-80G' };
    expect(statusLabel(whole)).toBe('2 \u00d7 A100-80G · training-pool');
    // a spawner that gave no words: the count and the type
    expect(statusLabel(STATUS)).toBe('2 \u00d7 A100-80G · training-pool');
    expect(statusLabel({ ...mig, gpus: 0, pool: 'compute-pool' })).toBe('CPU · compute-pool');
  });

  it('explains over quota in the tooltip', () => {
    expect(statusTitle({ ...STATUS, over_quota: true })).toContain('may be stopped (reclaimed)');
    expect(statusTitle(STATUS)).toContain('Pool training-pool on node gpu-node-1');
  });

  it('uses the spawn form words for quota and state', () => {
    const pool = POOLS.pools[0];
    expect(quotaWords(pool)).toBe('0 within quota, 4 with borrowing');
    expect(poolState(pool)).toBe('borrowing possible (may be reclaimed)');
    expect(quotaWords({ ...pool, quota: undefined })).toBe('no quota');
    expect(poolState({ ...pool, gpu_available: 0 })).toBe('full');
    expect(poolState({ ...pool, gpu_total: 0 })).toBe('CPU only');
    expect(
      quotaWords({ ...pool, quota: { managed: true, borrowing: false, within_quota: 1, available: 1 } })
    ).toBe('1 GPU within quota');
  });

  it('says a server runs over quota beside its state', () => {
    const server: IServer = {
      name: 'big',
      this: false,
      ready: true,
      pending: null,
      url: '/user/alice/big/',
      pool: 'dev-pool',
      node: 'gpu-node-5',
      gpus: 1,
      over_quota: true,
      state: 'running'
    };
    expect(serverState(server)).toBe('running, over quota');
    expect(serverState({ ...server, over_quota: false })).toBe('running');
    // no pod counted yet: the hub's word
    expect(serverState({ ...server, state: null, ready: false, pending: 'spawn' })).toBe('spawn, over quota');
    expect(serverState({ ...server, state: null, over_quota: false })).toBe('running');
  });
});

describe('the words of %gpupool status (jupyter_gpupool/core/words/gpu_use.py)', () => {
  // the expected words are Python's, for the same values
  it('says durations as the idle policy does', () => {
    const seconds = [0, 0.5, 1.5, 2.5, 30, 59.5, 60, 150, 3300, 3900, 7200, 3599.5, -5, 86465];
    expect(seconds.map(durationWords)).toEqual(
      ['0s', '0s', '2s', '2s', '30s', '1m', '1m', '2m30s', '55m', '1h05m', '2h00m', '1h00m', '0s', '24h01m']
    );
  });

  it('rounds percent and GiB as Python does (a half to even)', () => {
    expect([45, 2.5, 3.5, 0.5, 99.6, 44.5].map(percent)).toEqual(
      ['45%', '2%', '4%', '0%', '100%', '44%']
    );
    expect(percent(null)).toBeNull();
    expect([31744, 163840, 256, 768, 23040].map(m => gib(m))).toEqual(
      ['31.0', '160.0', '0.2', '0.8', '22.5']
    );
    expect([gib(163840, false), gib(23040, false)]).toEqual(['160', '22.5']);
  });

  it('says times in UTC, with the date when not today', () => {
    expect(clockWords(NOW, NOW)).toBe('22:13 UTC');
    expect(clockWords(NOW + 7200, NOW)).toBe('2023-11-15 00:13 UTC');
  });

  it('says the utilization and memory', () => {
    expect(utilizationLine(USE)).toBe('45% (max 90%), memory 31.0 of 160 GiB');
    expect(
      utilizationLine({ gpu_utilization: 45, gpu_utilization_max: 45.2, gpu_memory_used_mib: 31744 })
    ).toBe('45%, memory 31.0 GiB used');
    expect(utilizationLine({ ...USE, gpu_utilization: null })).toBeNull();
  });

  it('says since when the GPUs are idle and what happens then', () => {
    expect(idleLine(IDLE, NOW)).toBe('idle since 21:08 UTC; will be stopped at 23:08 UTC');
    expect(idleCell(IDLE, NOW)).toBe('idle 1h05m, stops in 55m');
    const report = { ...IDLE, stops_at: null, action: 'report', due_at: NOW + 600 };
    expect(idleLine(report, NOW)).toBe(
      'idle since 21:08 UTC; will be reported to admins at 22:23 UTC'
    );
    expect(idleCell(report, NOW)).toBe('idle 1h05m (report)');
    expect(idleLine({ ...report, due_at: NOW - 600 }, NOW)).toBe(
      'idle since 21:08 UTC; reported to admins'
    );
    const due = { ...IDLE, stops_at: NOW - 1, due_at: NOW - 1 };
    expect(idleLine(due, NOW)).toBe('idle since 21:08 UTC; being stopped');
    expect(idleCell(due, NOW)).toBe('idle 1h05m, stopping');
    expect(idleLine(null, NOW)).toBeNull();
    expect(idleCell(null, NOW)).toBeNull();
  });
});

describe("the status item's words", () => {
  const GPU = '2 \u00d7 A100-80G · training-pool';

  it('adds the utilization when measured, the time left when idle under a stop policy', () => {
    expect(statusLabel(STATUS, USE, NOW)).toBe(`${GPU} · 45%`);
    expect(statusLabel(STATUS, { ...USE, gpu_utilization: null }, NOW)).toBe(GPU);
    expect(statusLabel(STATUS, { ...USE, error: 'no answer' , gpu_utilization: null }, NOW)).toBe(GPU);
    const idle = { ...USE, gpu_utilization: 0, gpu_utilization_max: 0, idle: IDLE };
    expect(statusLabel(STATUS, idle, NOW)).toBe(`${GPU} · 0% · idle, stops in 55m`);
    expect(statusLabel(STATUS, idle, NOW + 3300)).toBe(`${GPU} · 0% · idle, stopping`);
    const report = { ...idle, idle: { ...IDLE, action: 'report', stops_at: null } };
    expect(statusLabel(STATUS, report, NOW)).toBe(`${GPU} · 0%`);
  });

  it('says what the GPUs do in the tooltip', () => {
    expect(useLine(USE)).toBe('GPU utilization 45% (max 90%), memory 31.0 of 160 GiB');
    const stale = { ...USE, gpu_utilization: null, problem: 'http://dcgm:9400/metrics: timed out' };
    expect(useLine(stale)).toBe(
      'GPU utilization not measured (http://dcgm:9400/metrics: timed out)'
    );
    expect(useLine({ ...stale, problem: null })).toBe('GPU utilization not measured');
    expect(useLine({ ...stale, error: 'no answer from the gpupool service' })).toBe(
      'GPU utilization unknown: no answer from the gpupool service'
    );
    expect(useLine(null, '502: Bad Gateway')).toBe('GPU utilization unknown: 502: Bad Gateway');
    const idle = { ...USE, idle: IDLE };
    expect(idleWords(idle, NOW)).toBe(
      'GPUs idle since 21:08 UTC; will be stopped at 23:08 UTC (in 55m)'
    );
    const reported = { ...IDLE, action: 'report', stops_at: null, due_at: NOW - 600 };
    expect(idleWords({ ...idle, idle: reported }, NOW)).toBe(
      'GPUs idle since 21:08 UTC; reported to admins'
    );
    expect(idleWords({ ...idle, idle: { ...reported, due_at: NOW + 600 } }, NOW)).toBe(
      'GPUs idle since 21:08 UTC; will be reported to admins at 22:23 UTC'
    );
    const title = statusTitle(STATUS, idle, NOW).split('\n');
    expect(title).toEqual([
      'Pool training-pool on node gpu-node-1',
      'Within quota',
      'GPU utilization 45% (max 90%), memory 31.0 of 160 GiB',
      'GPUs idle since 21:08 UTC; will be stopped at 23:08 UTC (in 55m)',
      'Click for pool availability and your servers'
    ]);
    // a CPU server says nothing of GPUs
    expect(statusTitle({ ...STATUS, gpus: 0 }, null, NOW)).not.toContain('GPU utilization');
  });
});

describe('GPUPoolModel', () => {
  it('asks only for the status while the panel is closed', async () => {
    const server = scripted();
    const model = new GPUPoolModel({ fetch: server.fetch, standby: 'never' });
    let changes = 0;
    model.changed.connect(() => changes++);
    await model.refresh();
    expect(server.asked).toEqual(['status', 'use']);
    expect(model.label).toBe('2 \u00d7 A100-80G · training-pool · 45%');
    expect(model.warning).toBe(false);
    expect(model.pools).toEqual([]);
    expect(changes).toBe(1);
    model.dispose();
  });

  it('asks for pools and servers at once when the panel opens', async () => {
    const server = scripted();
    const model = new GPUPoolModel({ fetch: server.fetch, standby: 'never', interval: 60000 });
    await model.poll.start();
    model.panelOpen = true;
    await sleep(50);
    expect(server.asked).toEqual(expect.arrayContaining(['pools', 'servers']));
    expect(model.pools.map(p => p.name)).toEqual(['dev-pool']);
    expect(model.servers[0].this).toBe(true);
    model.dispose();
  });

  it('keeps the pools in the order the service lists them (the spawn form\'s)', async () => {
    // the service puts the user's default order first: not the alphabet's
    const names = ['training-pool', 'inference-pool', 'dev-pool', 'compute-pool', 'default'];
    const pools = { pools: names.map(name => ({ ...POOLS.pools[0], name })) };
    const server = scripted();
    const fetch = async (route: string) => (route === 'pools' ? pools : server.fetch(route));
    const model = new GPUPoolModel({ fetch, standby: 'never', interval: 60000 });
    await model.poll.start();
    model.panelOpen = true;
    await sleep(50);
    expect(model.pools.map(p => p.name)).toEqual(names);
    model.dispose();
  });

  it('is a warning when the server runs over quota', async () => {
    const server = scripted({ ...STATUS, over_quota: true });
    const model = new GPUPoolModel({ fetch: server.fetch, standby: 'never' });
    await model.refresh();
    expect(model.warning).toBe(true);
    model.dispose();
  });

  it('asks what the GPUs do only of a server with GPUs', async () => {
    for (const status of [
      { ...STATUS, gpus: 0, pool: 'compute-pool' },
      { ...STATUS, pool: null, in_pool: false }
    ]) {
      const server = scripted(status);
      const model = new GPUPoolModel({ fetch: server.fetch, standby: 'never' });
      await model.refresh();
      expect(server.asked).toEqual(['status']);
      expect(model.use).toBeNull();
      expect(model.title).not.toContain('GPU utilization');
      model.dispose();
    }
  });

  it('keeps the status when `use` fails, says why, and does not back off', async () => {
    const server = scripted();
    server.useFailing = true;
    const model = new GPUPoolModel({ fetch: server.fetch, standby: 'never', interval: 20 });
    await model.poll.start();
    await sleep(200);
    expect(model.error).toBe('');
    expect(model.poll.state.phase).toBe('resolved');
    expect(model.poll.state.interval).toBe(20);
    expect(model.label).toBe('2 \u00d7 A100-80G · training-pool');
    expect(model.useError).toBe('502: no answer from the gpupool service');
    expect(model.title).toContain('GPU utilization unknown: 502: no answer from the gpupool service');
    // still asked on each poll: it comes back
    expect(server.asked.filter(r => r === 'use').length).toBeGreaterThan(2);
    server.useFailing = false;
    await model.poll.refresh();
    await sleep(50);
    expect(model.label).toBe('2 \u00d7 A100-80G · training-pool · 45%');
    expect(model.useError).toBe('');
    model.dispose();
  });

  it("warns of an idle stop with the time left on the server's clock", async () => {
    // the page's clock is 10 minutes behind the server's
    let page = (NOW - 600) * 1000;
    const idle = { ...USE, gpu_utilization: 0, gpu_utilization_max: 0, idle: IDLE };
    const server = scripted(STATUS, idle);
    const model = new GPUPoolModel({ fetch: server.fetch, standby: 'never', clock: () => page });
    const changed: string[] = [];
    model.changed.connect(() => changed.push(model.label));
    await model.refresh();
    expect(model.label).toBe('2 \u00d7 A100-80G · training-pool · 0% · idle, stops in 55m');
    expect(model.warning).toBe(true);
    expect(model.idleWarning).toBe(true);
    expect(model.title).toContain('will be stopped at 23:08 UTC (in 55m)');
    // the next poll, 10 s later on both clocks: the time left is said again
    page += 10_000;
    server.use = { ...idle, now: NOW + 10 };
    await model.refresh();
    expect(changed[1]).toBe('2 \u00d7 A100-80G · training-pool · 0% · idle, stops in 54m50s');
    // not yet warned (the policy's warning time has not come): the words, not the colour
    server.use = { ...idle, idle: { ...IDLE, warned: false } };
    await model.refresh();
    expect(model.label).toContain('idle, stops in 55m');
    expect(model.idleWarning).toBe(false);
    expect(model.warning).toBe(false);
    // a policy that only reports: no warning
    server.use = { ...idle, idle: { ...IDLE, action: 'report', stops_at: null, due_at: NOW - 1 } };
    await model.refresh();
    expect(model.idleWarning).toBe(false);
    expect(model.label).toBe('2 \u00d7 A100-80G · training-pool · 0%');
    expect(model.title).toContain('GPUs idle since 21:08 UTC; reported to admins');
    model.dispose();
  });

  it('says the server was stopped and why, and stops polling, once its routes are gone', async () => {
    const booking = {
      kind: 'booking',
      words: 'this server borrows GPUs booked for ml-ops from 22:14 UTC: it is stopped then',
      deadline: NOW + 40,
      action: 'stop'
    };
    const server = scripted(STATUS, { ...USE, notice: booking, notices: [booking] });
    const model = new GPUPoolModel({
      fetch: server.fetch,
      standby: 'never',
      interval: 20,
      clock: () => NOW * 1000
    });
    await model.poll.start();
    await sleep(30);
    expect(model.label).toBe('2 \u00d7 A100-80G · training-pool · 45% · booking, stops in 40s');
    server.gone = true;
    await sleep(200);
    expect(model.stopped).toBe(true);
    expect(model.label).toBe('Server stopped · booking');
    expect(model.title).toBe(
      'This server was stopped (seen at 22:13 UTC): a booking needed its GPUs.\n' +
        'Start a new one from the hub’s home page; My GPUs says more.'
    );
    expect(model.title).not.toContain('<');
    expect(model.error).toBe('');
    expect(model.warning).toBe(true);
    // no more requests: the poll is disposed
    expect(model.poll.isDisposed).toBe(true);
    const asked = server.asked.length;
    await sleep(100);
    expect(server.asked.length).toBe(asked);
    model.dispose();
  });

  it('says a server stopped without a notice due was stopped by someone', async () => {
    const server = scripted();
    const model = new GPUPoolModel({ fetch: server.fetch, standby: 'never', clock: () => NOW * 1000 });
    await model.refresh();
    server.gone = true;
    await model.refresh(); // resolves: a stopped server is no failure to back off from
    expect(model.label).toBe('Server stopped');
    expect(model.title.split('\n')[0]).toBe(
      'This server was stopped (seen at 22:13 UTC), by you, an admin or the hub.'
    );
    await sleep(10);
    expect(model.poll.isDisposed).toBe(true);
    model.dispose();
  });

  it("tells the hub's answers from the extension's", () => {
    expect(goneAnswer(404, false)).toBe(true); // the hub's 404 page
    expect(goneAnswer(424, false)).toBe(true);
    expect(goneAnswer(503, false)).toBe(true);
    expect(goneAnswer(404, true)).toBe(false); // the extension's own JSON 404
    expect(goneAnswer(502, false)).toBe(false); // the service does not answer: try again
    expect(goneAnswer(500, false)).toBe(false);
  });

  it('backs off while the server fails, and comes back to its interval', async () => {
    const server = scripted();
    server.failing = true;
    const model = new GPUPoolModel({
      fetch: server.fetch,
      standby: 'never',
      interval: 20,
      maxInterval: 400
    });
    const intervals: number[] = [];
    model.poll.ticked.connect((_, tick) => {
      if (tick.phase === 'rejected') {
        intervals.push(tick.interval);
      }
    });
    await model.poll.start();
    await sleep(700);
    expect(model.error).toBe('502: no answer from the gpupool service');
    expect(intervals.length).toBeGreaterThan(2);
    expect(Math.max(...intervals)).toBeGreaterThan(40); // it grew
    // fewer requests than a steady 20 ms poll would have made
    expect(server.asked.length).toBeLessThan(700 / 20 / 2);
    server.failing = false;
    await model.poll.refresh();
    await sleep(50);
    expect(model.error).toBe('');
    expect(model.poll.state.phase).toBe('resolved');
    expect(model.poll.state.interval).toBe(20);
    model.dispose();
  });

  it('stands by while told to (the page is hidden)', async () => {
    const server = scripted();
    let hidden = true;
    const model = new GPUPoolModel({
      fetch: server.fetch,
      standby: () => hidden,
      interval: 10
    });
    await model.poll.start();
    await sleep(100);
    expect(server.asked).toEqual([]);
    hidden = false;
    await sleep(100);
    expect(server.asked.length).toBeGreaterThan(0);
    model.dispose();
  });

  it('stands by when the page is hidden, by default', () => {
    const model = new GPUPoolModel({ fetch: scripted().fetch });
    expect(model.poll.standby).toBe('when-hidden');
    model.dispose();
  });
});
