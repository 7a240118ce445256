import t from 'tap';
import { hostProblem, isHost } from '../../packages/lease-core/src/index.js';

const cases: ReadonlyArray<readonly [string, unknown, boolean]> = [
  ['a plain name is a host', 'mbp', true],
  ['digits and dashes are allowed', 'node-b2', true],
  ['32 characters is the longest host', 'a'.repeat(32), true],
  ['33 characters is too long', 'a'.repeat(33), false],
  ['a leading dash is refused', '-mbp', false],
  ['upper case is refused (no case folding)', 'MBP', false],
  ['surrounding space is refused (no trimming)', ' mbp', false],
  ['constructor is reserved', 'constructor', false],
  ['prototype is reserved', 'prototype', false],
  ['__proto__ does not match the pattern', '__proto__', false],
  ['a unicode lookalike is refused', 'mbр', false],
  ['a number is not a host', 1, false],
  ['an array holding a host is not a host', ['mbp'], false],
];

for (const [name, value, expected] of cases) {
  t.test(name, async (t) => {
    t.equal(isHost(value), expected, `isHost(${JSON.stringify(value)})`);
    t.equal(hostProblem(value) === null, expected, 'hostProblem agrees with isHost');
  });
}

t.test('hostProblem explains each kind of refusal', async (t) => {
  t.equal(hostProblem(7), 'must be a string', 'non-strings');
  t.match(hostProblem('prototype'), /reserved/, 'reserved names');
  t.match(hostProblem('A'), /must match/, 'pattern');
});
