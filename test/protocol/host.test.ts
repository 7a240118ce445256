import t from 'tap';
import {
  HOST_MAX_LENGTH,
  HOST_PATTERN,
  HOST_SCHEMA_PATTERN,
  RESERVED_NAMES,
  hostProblem,
  isHost,
} from '../../packages/protocol/src/index.js';

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
  ['a name that only starts with a reserved one is a host', 'constructors', true],
  ['__proto__ does not match the pattern', '__proto__', false],
  ['a unicode lookalike is refused', 'mbр', false],
  ['a number is not a host', 1, false],
  ['an array holding a host is not a host', ['mbp'], false],
];

// Every schema of every side takes HOST_SCHEMA_PATTERN: it must say what isHost says.
const schema = new RegExp(HOST_SCHEMA_PATTERN);

for (const [name, value, expected] of cases) {
  t.test(name, async (t) => {
    t.equal(isHost(value), expected, `isHost(${JSON.stringify(value)})`);
    t.equal(hostProblem(value) === null, expected, 'hostProblem agrees with isHost');
    if (typeof value === 'string') t.equal(schema.test(value), expected, 'the schema pattern agrees with isHost');
  });
}

t.test('hostProblem explains each kind of refusal', async (t) => {
  t.equal(hostProblem(7), 'must be a string', 'non-strings');
  t.equal(hostProblem('prototype'), '"prototype" is a reserved name', 'reserved names');
  t.equal(hostProblem('A'), 'must match ^[a-z0-9][a-z0-9-]{0,31}$', 'the pattern, as the docs write it');
});

t.test('the rule is the documented host name rule', async (t) => {
  t.equal(HOST_PATTERN.source, '^[a-z0-9][a-z0-9-]{0,31}$', 'the pattern');
  t.same([...RESERVED_NAMES], ['constructor', 'prototype'], 'the reserved names');
  t.ok(Object.isFrozen(RESERVED_NAMES), 'frozen');
  t.equal(HOST_MAX_LENGTH, 32, 'the longest name the pattern takes');
});
