import {
  GPUPoolModel,
  IServer,
  IStatus,
  poolState,
  quotaWords,
  serverState,
  statusLabel,
  statusTitle
} from '../src/model';

const STATUS: IStatus = {
  label: 'GPU 2\u00d7 A100-80G · training-pool',
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

/** A scripted `/gpupool/` server: answers by route, or fails while `failing` is set. */
function scripted(status: IStatus = STATUS) {
  const asked: string[] = [];
  const server = {
    asked,
    failing: false,
    status,
    fetch: async (route: string) => {
      asked.push(route);
      if (server.failing) {
        throw new Error('502: no answer from the gpupool service');
      }
      return { status: server.status, pools: POOLS, servers: SERVERS }[route];
    }
  };
  return server;
}

function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms));
}

describe('labels', () => {
  it('says the GPUs and the pool, or CPU', () => {
    expect(statusLabel(STATUS)).toBe('GPU 2\u00d7 A100-80G · training-pool');
    expect(statusLabel({ ...STATUS, gpus: 0, pool: 'compute-pool' })).toBe('CPU · compute-pool');
    expect(statusLabel({ ...STATUS, gpu_type: null, gpus: 1 })).toBe('GPU 1\u00d7 · training-pool');
    expect(statusLabel({ ...STATUS, pool: null })).toBe('not in a GPU pool');
    expect(statusLabel(null)).toBe('GPU pool…');
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

describe('GPUPoolModel', () => {
  it('asks only for the status while the panel is closed', async () => {
    const server = scripted();
    const model = new GPUPoolModel({ fetch: server.fetch, standby: 'never' });
    let changes = 0;
    model.changed.connect(() => changes++);
    await model.refresh();
    expect(server.asked).toEqual(['status']);
    expect(model.label).toBe('GPU 2\u00d7 A100-80G · training-pool');
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

  it('is a warning when the server runs over quota', async () => {
    const server = scripted({ ...STATUS, over_quota: true });
    const model = new GPUPoolModel({ fetch: server.fetch, standby: 'never' });
    await model.refresh();
    expect(model.warning).toBe(true);
    model.dispose();
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
