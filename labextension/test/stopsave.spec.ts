import {
  SAVE_LEAD,
  StopWatcher,
  TOAST_LENGTH,
  announceWords,
  savedNoticeWords,
  savedWords,
  savingWords
} from '../src/stopsave';

const NOW = 1_800_000_000; // 2027-01-15 08:00:00 UTC
// the idle policy's words, as service/monitoring/idlewatch.py writes them
const IDLE = {
  kind: 'idle',
  words:
    "this server's GPUs have been idle since 06:05 UTC: it stops at 08:05 UTC unless they get busy",
  deadline: NOW + 300, // 08:05 UTC
  action: 'stop'
};
const BUDGET = {
  kind: 'budget',
  words: 'your budget of 10 GPU-hours per day is 92% spent',
  deadline: NOW + 30,
  action: 'report'
};

describe('the stop watcher', () => {
  it('saves once when a stop is within a minute, not before', () => {
    const w = new StopWatcher();
    // five minutes ahead, then 61 s ahead: nothing to save yet
    expect(w.step([IDLE], NOW).save).toBeNull();
    expect(w.step([IDLE], IDLE.deadline - 61).save).toBeNull();
    // 60 s ahead: save, once
    expect(w.step([IDLE], IDLE.deadline - SAVE_LEAD).save).toEqual(IDLE);
    expect(w.step([IDLE], IDLE.deadline - 30).save).toBeNull();
    expect(w.step([IDLE], IDLE.deadline + 5).save).toBeNull();
    // the same rule with a new deadline (the GPUs were busy, then idle again) saves again
    const again = { ...IDLE, deadline: NOW + 4000 };
    expect(w.step([again], again.deadline - 10).save).toEqual(again);
  });

  it('does not save for a notice that only reports', () => {
    const w = new StopWatcher();
    expect(w.step([BUDGET], NOW).save).toBeNull();
    expect(w.step([BUDGET], BUDGET.deadline + 10).save).toBeNull();
    expect(w.step([{ ...IDLE, deadline: null }], NOW).save).toBeNull();
  });

  it('saves for the first stop that comes near, once for all that are near', () => {
    const w = new StopWatcher();
    const runtime = { ...IDLE, kind: 'runtime', words: 'runtime', deadline: NOW + 20 };
    const step = w.step([BUDGET, runtime, IDLE], NOW);
    expect(step.save).toEqual(runtime);
    expect(w.step([BUDGET, runtime, IDLE], NOW + 250).save).toEqual(IDLE);
    expect(w.step([BUDGET, runtime, IDLE], NOW + 260).save).toBeNull();
  });

  it('announces each notice once, when it first appears', () => {
    const w = new StopWatcher();
    expect(w.step([], NOW).announce).toEqual([]);
    expect(w.step([null, undefined], NOW).announce).toEqual([]);
    expect(w.step([IDLE], NOW).announce).toEqual([IDLE]);
    expect(w.step([IDLE], NOW + 10).announce).toEqual([]);
    expect(w.step([IDLE, BUDGET], NOW + 20).announce).toEqual([BUDGET]);
    expect(w.step([BUDGET], NOW + 30).announce).toEqual([]);
    // a new deadline is a new notice
    const later = { ...IDLE, deadline: NOW + 900 };
    expect(w.step([later, BUDGET], NOW + 40).announce).toEqual([later]);
  });
});

describe('the words', () => {
  it('say a stop once, short enough for a toast', () => {
    expect(savingWords(IDLE, NOW + 250)).toBe('Saving your work: this server stops at 08:05 UTC.');
    expect(savingWords(IDLE, NOW + 400)).toBe('Saving your work: this server is being stopped.');
    expect(savedNoticeWords(['a.ipynb'], IDLE, NOW + 250)).toBe(
      '1 notebook saved: this server stops at 08:05 UTC.'
    );
    expect(savedNoticeWords([], IDLE, NOW + 250)).toBe(
      'Nothing unsaved: this server stops at 08:05 UTC.'
    );
    // a stop: its kind and when; the words (which say the time too) are behind Details
    expect(announceWords(IDLE, NOW)).toBe('Idle GPUs: this server stops at 08:05 UTC.');
    const booking = {
      kind: 'booking',
      words:
        'this server borrows GPUs booked for ml-ops from 04:54 UTC: it is stopped then',
      deadline: NOW + 600,
      action: 'stop'
    };
    expect(announceWords(booking, NOW)).toBe('Booking: this server stops at 08:10 UTC.');
    // a report in its own words, once (no time added after them)
    expect(announceWords(BUDGET, NOW)).toBe('Your budget of 10 GPU-hours per day is 92% spent.');
    const long = { ...BUDGET, words: 'x'.repeat(TOAST_LENGTH) };
    expect(announceWords(long, NOW)).toBe('GPU-hour budget: see Details.');
    for (const n of [IDLE, booking, BUDGET, long]) {
      for (const words of [announceWords(n, NOW), savingWords(n, NOW), savedNoticeWords(['a.ipynb', 'b.ipynb'], n, NOW)]) {
        expect(words.length).toBeLessThanOrEqual(TOAST_LENGTH);
        expect(words.match(/UTC/g)?.length ?? 0).toBeLessThanOrEqual(1); // the time said once
      }
    }
  });

  it('count what was saved', () => {
    expect(savedWords([])).toBe('Nothing unsaved');
    expect(savedWords(['a.ipynb'])).toBe('1 notebook saved');
    expect(savedWords(['a.ipynb', 'b/c.ipynb', 'd.ipynb'])).toBe('3 notebooks saved');
    expect(savedWords(['a.ipynb', 'notes.md'])).toBe('2 documents saved');
  });
});
