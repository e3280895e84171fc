import { GPUPoolModel, IStatus, IUse, statusLabel, statusTitle } from '../src/model';
import { countdown, noticeLabel, noticeWords } from '../src/notice';

const NOW = 1_800_000_000; // 2027-01-15 08:00 UTC
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
const GPU = '2 \u00d7 A100-80G · training-pool';
const RUNTIME = {
  kind: 'runtime',
  words: 'this server has run for 7h56m; servers here may run 8h: it stops at 2027-01-15 08:04 UTC',
  deadline: NOW + 240,
  action: 'stop'
};
const BUDGET = {
  kind: 'budget',
  words: 'your budget of 10 GPU-hours per day is 92% spent',
  deadline: NOW + 1800,
  action: 'report'
};
const USE: IUse = {
  gpu_utilization: null,
  gpu_utilization_max: null,
  gpu_memory_used_mib: null,
  gpu_memory_total_mib: null,
  measured_at: null,
  idle: null,
  notice: null,
  source: 'none',
  problem: null,
  error: null,
  now: NOW
};

describe('a notice', () => {
  it('shows the time left to a stop in the label, and its words in the tooltip', () => {
    const use = { ...USE, notice: RUNTIME };
    expect(statusLabel(STATUS, use, NOW)).toBe(`${GPU} · runtime limit, stops in 4m`);
    expect(statusLabel(STATUS, use, NOW + 240)).toBe(`${GPU} · runtime limit, stopping`);
    expect(statusTitle(STATUS, use, NOW).split('\n')).toContain(`${RUNTIME.words} (stops in 4m)`);
    // a report: named, no countdown in the label; its deadline in the words
    const budget = { ...USE, notice: BUDGET };
    expect(statusLabel(STATUS, budget, NOW)).toBe(`${GPU} · budget`);
    expect(noticeWords(BUDGET, NOW)).toBe(`${BUDGET.words} (due in 30m)`);
    expect(noticeWords({ ...BUDGET, deadline: null }, NOW)).toBe(BUDGET.words);
    // the idle notice is said by the idle words already
    expect(noticeLabel({ ...RUNTIME, kind: 'idle' }, NOW)).toBe('');
    expect(statusLabel(STATUS, USE, NOW)).toBe(GPU);
    expect(countdown(3900)).toBe('1h05m');
    expect(countdown(20)).toBe('20s');
  });

  it('turns the status item to the warning colour when it ends in a stop', async () => {
    let use: IUse = { ...USE, notice: BUDGET };
    const fetch = async (route: string) => ({ status: STATUS, use })[route as 'status' | 'use'];
    const model = new GPUPoolModel({ fetch, standby: 'never', clock: () => NOW * 1000 });
    await model.refresh();
    expect(model.noticeWords).toBe(`${BUDGET.words} (due in 30m)`);
    expect(model.noticeWarning).toBe(false);
    expect(model.warning).toBe(false);
    use = { ...USE, notice: RUNTIME };
    await model.refresh();
    expect(model.label).toBe(`${GPU} · runtime limit, stops in 4m`);
    expect(model.noticeWarning).toBe(true);
    expect(model.warning).toBe(true);
    use = { ...USE };
    await model.refresh();
    expect(model.noticeWords).toBe('');
    expect(model.warning).toBe(false);
    model.dispose();
  });
});
