/** `GET /v1/status`: the status page's model, as the page's script and `hq lease status` read it. */
import Type, { type Static } from 'typebox';
import { Arbiters, TimingProblemOut } from '@hq/protocol/schemas';

const Num = Type.Union([Type.Number(), Type.Null()]);

export const HostStatus = Type.Object({
  host: Type.String(),
  role: Type.Union([
    Type.Literal('holder'),
    Type.Literal('standby'),
    Type.Literal('arbiter'),
    Type.Literal('observer'),
  ]),
  lastHeartbeatAgeSeconds: Num,
  heartbeatSeconds: Num,
  /** The heartbeat cell as both renderers print it, and whether it is a problem (silent, refused). */
  heartbeatText: Type.String(),
  heartbeatProblem: Type.Boolean(),
  view: Type.Union([
    Type.Object({
      target: Type.String(),
      reachable: Type.Boolean(),
      ping: Type.Boolean(),
      health: Type.Boolean(),
      ageSeconds: Type.Number(),
    }),
    Type.Null(),
  ]),
  /** The "view of holder" cell: what this host last said of the holder; ok/bad only for a view a check counts. */
  viewText: Type.String(),
  viewLevel: Type.Union([Type.Literal('ok'), Type.Literal('bad'), Type.Literal('muted')]),
  load: Type.Union([
    Type.Object({
      loadAvg: Type.Optional(Type.Array(Type.Number())),
      cpuCount: Type.Optional(Type.Number()),
      freeMem: Type.Optional(Type.Number()),
      totalMem: Type.Optional(Type.Number()),
      ageSeconds: Type.Optional(Type.Number()),
    }),
    Type.Null(),
  ]),
  loadText: Type.String(),
  /** Protocol 2: what the host last said of its version (its heartbeat; the arbiter's own row: itself). Null: not heard yet. */
  protocol: Type.Union([Type.Integer(), Type.Null()]),
  /** Its hq release; null when it did not say (protocol 1: hq 0.1.x). */
  release: Type.Union([Type.String(), Type.Null()]),
  /** "hq 0.1 (protocol 1)", or "—". */
  versionText: Type.String(),
  /** "mbp runs hq 0.1 (protocol 1); upgrade it" for a host behind this arbiter's protocol, else null. */
  upgrade: Type.Union([Type.String(), Type.Null()]),
});
export type HostStatusT = Static<typeof HostStatus>;

/** One candidate's confirmation path to a peer, as its last heartbeat reported its probes. */
export const PeerPathStatus = Type.Object({
  host: Type.String(),
  peer: Type.String(),
  ok: Type.Boolean(),
  problem: Type.Union([Type.String(), Type.Null()]),
  /** Seconds since the path has been in this state. */
  forSeconds: Type.Number(),
  /** The line both renderers print ("mbp → node-b broken for 2.0 min: …"). */
  text: Type.String(),
});
export type PeerPathStatusT = Static<typeof PeerPathStatus>;

export const StatusAnswer = Type.Object({
  now: Type.Number(),
  maintenance: Type.Object({ enabled: Type.Boolean(), reason: Type.Union([Type.String(), Type.Null()]) }),
  failover: Type.Object({
    seconds: Num,
    lockDelaySeconds: Num,
    promoteAfterChecks: Type.Integer(),
    checkSeconds: Type.Number(),
    heartbeatSeconds: Num,
    text: Type.String(),
    problem: Type.Union([Type.String(), Type.Null()]),
  }),
  timingProblems: Type.Array(TimingProblemOut),
  /** Every reported path between candidates, broken ones first (empty until an agent reports one). */
  peerPaths: Type.Array(PeerPathStatus),
  /** What is going on, in one line: the top of the page. */
  phase: Type.Object({
    name: Type.Union([
      Type.Literal('no-holder'),
      Type.Literal('holder-silent'),
      Type.Literal('lock-delay'),
      Type.Literal('timing-problem'),
      Type.Literal('peer-path-broken'),
      Type.Literal('failed-over'),
      Type.Literal('standby-down'),
      Type.Literal('healthy'),
    ]),
    level: Type.Union([Type.Literal('ok'), Type.Literal('warn'), Type.Literal('bad')]),
    text: Type.String(),
  }),
  hosts: Type.Array(HostStatus),
  /** The last report or grant the generation bounds refused since the arbiter started; null when none. */
  generationRefusal: Type.Optional(
    Type.Union([
      Type.Object({
        at: Type.Number(),
        host: Type.Union([Type.String(), Type.Null()]),
        kind: Type.Union([Type.Literal('report-jump'), Type.Literal('ceiling')]),
        generation: Type.Number(),
        message: Type.String(),
      }),
      Type.Null(),
    ]),
  ),
  /** Store etcd only: which arbiter decides, and etcd's members. */
  arbiters: Type.Optional(Arbiters),
  /** Store etcd only: `arbiters` in the card's words, which the page's refresh shows. */
  arbitersLine: Type.Optional(
    Type.Object({
      text: Type.String(),
      level: Type.Union([Type.Literal('ok'), Type.Literal('warn'), Type.Literal('bad')]),
    }),
  ),
});
export type StatusAnswerT = Static<typeof StatusAnswer>;
