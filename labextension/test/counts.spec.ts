/**
 * The side panel and the status item count a slice as every surface does (issue 40): pools in
 * GPU-equivalents, a server by what it has in the service's words.
 *
 * The rows are the service's answers in the demo's case (tests/service/web/pages/
 * test_slice_counts.py): alice runs a MIG 1g.10gb of gpu-node-mig-1's A100 in training-pool
 * (16 whole A100s and the MIG A100's 3g.40gb, 2g.20gb and 2 x 1g.10gb instances).
 */

import { IPool, IServer, IStatus, statusLabel } from '../src/model';
import {
  countText,
  freeEquivalents,
  freeWords,
  poolState,
  quotaWords,
  serverGPUs
} from '../src/panelwords';

/** training-pool's row of `GET api/v1/launch-options` for alice, her 1g.10gb running. */
const TRAINING: IPool = {
  name: 'training-pool',
  status: 'active',
  gpu_total: 17,
  gpu_available: 16,
  whole_gpus: { total: 16, used: 0, free: 16 },
  gpus_text: '16 whole + 1 in MIG instances: 3 of 4 instances free',
  largest_free_block: 8,
  node_count: 3,
  schedulable_nodes: 3,
  shapes: [
    { id: 'whole', kind: 'whole', free: 16, equivalent_gpus: 1.0 },
    { id: 'mig-3g.40gb', kind: 'mig', free: 1, equivalent_gpus: 0.42857142857142855 },
    { id: 'mig-2g.20gb', kind: 'mig', free: 1, equivalent_gpus: 0.2857142857142857 },
    { id: 'mig-1g.10gb', kind: 'mig', free: 1, equivalent_gpus: 0.14285714285714285 }
  ],
  quota: {
    managed: true,
    borrowing: true,
    within_quota: 1,
    available: 3,
    within_equivalents: 1.857
  }
};

/** A pool of MIG instances only: no whole GPU at all. */
const MIG_ONLY: IPool = {
  ...TRAINING,
  name: 'mig-pool',
  gpu_total: 1,
  gpu_available: 0,
  whole_gpus: { total: 0, used: 0, free: 0 },
  largest_free_block: 0,
  shapes: TRAINING.shapes!.filter(s => s.kind === 'mig'),
  quota: undefined
};

describe('a pool with a slice in use', () => {
  it('counts what is free in GPU-equivalents, the instances with the whole GPUs', () => {
    // 16 whole + 3/7 + 2/7 + 1/7 free of 17
    expect(freeEquivalents(TRAINING)).toBeCloseTo(16 + 6 / 7, 9);
    expect(freeWords(TRAINING)).toBe('16.86 of 17 free');
    expect(countText(0.143)).toBe('0.14');
    expect(countText(17)).toBe('17');
  });

  it('says the quota left in GPU-equivalents beside the whole GPUs', () => {
    expect(quotaWords(TRAINING)).toBe('1.86 (1 whole) within quota, 3 with borrowing');
    const within = { ...TRAINING.quota!, available: 1 };
    expect(quotaWords({ ...TRAINING, quota: within })).toBe(
      '1.86 GPUs (1 whole) within quota'
    );
    // a service without the exact figure: whole GPUs, as before
    const old = { ...within, within_equivalents: undefined };
    expect(quotaWords({ ...TRAINING, quota: old })).toBe('1 GPU within quota');
  });

  it('says how many wait in line for a full pool', () => {
    const full = { ...TRAINING, gpu_available: 0, largest_free_block: 0 };
    expect(poolState(full)).toBe('full');
    expect(poolState({ ...full, waiting: 2 })).toBe('full, 2 waiting in line');
  });

  it('reads a pool of instances only by its free instances, not as CPU only', () => {
    expect(poolState(MIG_ONLY)).toBe('free');
    const used = MIG_ONLY.shapes!.map(s => ({ ...s, free: 0 }));
    expect(poolState({ ...MIG_ONLY, shapes: used })).toBe('full');
    expect(poolState({ ...MIG_ONLY, shapes: [] })).toBe('CPU only');
  });
});

describe('a server on a slice', () => {
  const server: IServer = {
    name: '',
    this: true,
    ready: true,
    pending: null,
    url: null,
    pool: 'training-pool',
    node: 'gpu-node-mig-1',
    gpus: 0, // nvidia.com/gpu: a MIG device of the mixed strategy is none of them
    shape_text: 'MIG 1g.10gb of an A100-80G',
    over_quota: false,
    state: 'running'
  };

  it('says what it has in the service words, not its 0 nvidia.com/gpu', () => {
    expect(serverGPUs(server)).toBe('MIG 1g.10gb of an A100-80G');
    expect(serverGPUs({ ...server, shape_text: undefined, gpus: 2 })).toBe('2');
    expect(serverGPUs({ ...server, shape_text: null, gpus: null })).toBe('—');
  });

  it('is named alike in the status item, whole GPUs too', () => {
    const status: IStatus = {
      label: '',
      in_pool: true,
      pool: 'training-pool',
      platform: null,
      gpus: 2,
      gpu_type: 'A100-80G',
      shape: 'whole',
      shape_text: '2 \u00d7 A100-80G',
      over_quota: false,
      node: 'gpu-node-1',
      user: 'alice',
      server: ''
    };
    expect(statusLabel(status)).toBe('2 \u00d7 A100-80G · training-pool');
    const mig = { ...status, gpus: 1, shape: 'mig-1g.10gb', shape_text: server.shape_text };
    expect(statusLabel(mig)).toBe('MIG 1g.10gb of an A100-80G · training-pool');
  });
});
