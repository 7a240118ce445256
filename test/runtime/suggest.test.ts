import t from 'tap';
import { didYouMean, editDistance, nearest } from '../../packages/runtime/src/suggest.js';

t.test('edit distance counts one typo as one', async (t) => {
  const cases: [string, string, number][] = [
    ['role', 'role', 0],
    ['rol', 'role', 1],
    ['rloe', 'role', 1],
    ['rolle', 'role', 1],
    ['', 'abc', 3],
    ['abc', '', 3],
    ['kitten', 'sitting', 3],
  ];
  for (const [a, b, d] of cases) t.equal(editDistance(a, b), d, `${JSON.stringify(a)} → ${JSON.stringify(b)} is ${d}`);
});

t.test('nearest picks a typo or a unique prefix, and nothing for a stranger', async (t) => {
  const flags = ['config', 'role', 'recheck', 'grace', 'skip-exit', 'json'];
  const cases: [string, string | null, string][] = [
    ['rol', 'role', 'a missing letter'],
    ['rloe', 'role', 'swapped letters'],
    ['Role', 'role', 'case is ignored'],
    ['rech', 'recheck', 'a unique prefix'],
    ['r', null, 'an ambiguous prefix of one letter is no suggestion'],
    ['skipexit', 'skip-exit', 'a missing dash'],
    ['verbose', null, 'an unrelated word gets no suggestion'],
    ['', null, 'nothing typed, nothing suggested'],
  ];
  for (const [typed, want, why] of cases) t.equal(nearest(typed, flags), want, `${JSON.stringify(typed)}: ${why}`);
  t.equal(nearest('ab', ['ac', 'ad']), 'ac', 'a tie goes to the first candidate');
});

t.test('didYouMean renders the hint or nothing', async (t) => {
  t.equal(
    didYouMean('rol', ['role'], (c) => `--${c}`),
    ' (did you mean --role?)',
    'with a renderer',
  );
  t.equal(didYouMean('ttlSecond', ['ttlSeconds']), ' (did you mean ttlSeconds?)', 'plain');
  t.equal(didYouMean('zzz', ['role']), '', 'nothing near');
});
