/*
 * hq's lease protocol as a Promela model, checked by spin.
 *
 * The decisions of packages/lease-core (arbiter.ts, agent.ts) for one arbiter and N = 2 or 3
 * candidates, plus the step-down acknowledgement, under every interleaving
 * of requests, answers, lost messages, crashes, sleeps and clock jumps. docs/SAFETY.md ("The
 * model check") lists what was checked, with which numbers, and why this abstraction is
 * enough; `npm run model` (scripts/model.mjs) and test/model/spin.test.ts run it.
 *
 * Properties, asserted at the end of every transition (so in every reachable state):
 *   S1  one holder per generation as the agents observe it, across all agents and all time;
 *       every grant lies above every generation an agent has observed; no fenced child starts
 *       a generation below one that already ran;
 *   S2  no two hosts answer `run: true` at the same instant;
 *   S2w no two hosts have a fenced child doing work at the same instant (S2 and S3 together:
 *       what a step-down must keep true when it ends a lock-delay early).
 *
 * Abstraction (SAFETY.md says why each step keeps every behaviour that matters):
 *   - Discrete time: `tick` advances every clock by one unit, everything else happens between
 *     ticks in any order. Every time is a countdown from now ("ticks until expiresAt +
 *     margin", "validity left"), saturating at 0: the state space is finite and runs are not
 *     bounded in length.
 *   - Generations are bounded by G: an execution that would grant G + 1 ends there (`ovf`).
 *   - A request reaches its receiver in the instant it is sent or never; an arbiter answer
 *     arrives 0..RT ticks later or is lost. A peer round is decided in one instant (peers
 *     decide and answer at once: the asker's validity then ends when it would anyway and starts
 *     no later). The two requests whose lateness matters are late here: a handover's release
 *     (delivered at any later time) and the step-down acknowledgement (any generation a host
 *     stepped down from may be acknowledged again at any time: late and duplicate acks).
 *     A report counts for S2.3/S2.4 when sent more than RT after the arbiter's start (every
 *     report lease-core counts — received ≥ 2 RT after the start — was sent ≥ RT after it).
 *   - The arbiter's clock is the reference. Each agent's clock has a fixed rate error chosen at
 *     the start: every interval of a tick or more it measures one tick long, short or right
 *     (`rate` 0 slow, 1 exact, 2 fast) — at TTL = 3 a 33 % error, far beyond the 1 % of S6.
 *     The request timeout (much shorter than the TTL) is measured exactly.
 *   - Views and probes are not modelled: `transfer` may give the lease to any candidate at any
 *     moment behind the old holder's lock-delay, which includes every promotion S5 allows (a
 *     promotion is that grant behind that lock-delay with more preconditions).
 *
 * Faults: any message lost, answers delayed up to RT, kill -9 and restart of an agent (its disk
 * kept; its fenced children keep running — their supervisors are separate processes), of the
 * arbiter with its database kept or lost, forward wall-clock jumps of an agent and of the
 * arbiter's host while the arbiter is down, laptop sleep (monotonic clock stopped, wall
 * running), pauses of any process (it simply does not act while time passes).
 *
 * One -D switch removes one mechanism; each must give a counterexample (scripts/model.mjs):
 *   NO_LOCK_DELAY NO_CONF_LOCKDELAY NO_STANDBY_WAIT NO_START_WAIT NO_FLOOR NO_FLOOR_WAIT
 *   NO_START_GUARD NO_SAFETY_MARGIN VALIDITY_FROM_RECEIVE WALL_WAITS MONO_VALIDITY
 *   ACK_BEFORE_PERSIST ACK_BEFORE_CHILDREN_GONE ACCEPT_ANY_GEN_ACK ACCEPT_FORGED_ACK
 *   ACK_ENDS_WHOLE_DELAY SD_IN_MEMORY RESTART_KEEPS_NB RESTORE_PENDING ACK_LIFT_WITHOUT_RAN
 * Size switches: N (candidates), G (generations), TTL, RT, NO_DRIFT, NO_SLEEP, NO_JUMPS,
 * NO_READS, NO_ARBITER_RESTART, NO_KEPT_RESTART (the arbiter restarts only with its database
 * lost), NO_LOST_RESTART with NO_RESTART_JUMP (only with it kept, no jump), NO_AGENT_RESTART,
 * NO_ROUNDS, NO_STEP_DOWN (no push, ack or handover), NO_HANDOVER, NO_REPLAY, NO_FORGE,
 * ANSWER_AT_ONCE, and the budgets TICKS, ACQUIRES, TRANSFERS, LOSSES, ARBITER_RESTARTS, AGENT_RESTARTS:
 * a configuration leaves out behaviours to stay small, never adds one, and never a mechanism.
 * SYMMETRY stores one state per renaming of the hosts (a reduction, not a size switch: see hq_canon).
 */

#ifndef N
#define N 2
#endif
#ifndef G
#define G 3
#endif
#ifndef TTL
#define TTL 3
#endif
#ifdef NO_SAFETY_MARGIN
#define M 0
#else
#define M 1
#endif
/* The request timeout: an answer older than this is dropped. RT < TTL - M (S6). */
#ifndef RT
#define RT 1
#endif

#define NONE N          /* no host: a record without holder, no target */
#define UNK (N + 1)     /* the agent knows no record (lease-core `known: null`) */
#define INF 255         /* a wait that does not end by itself (the floor is pending) */

#define MAX(x, y) ((x) > (y) -> (x) : (y))
#define DEC(x) if :: (x) > 0 -> x-- :: else fi
#define DECI(x) if :: ((x) > 0 && (x) != INF) -> x-- :: else fi
#define SUB1(x) if :: ((x) > 0 && (x) != INF) -> x-- :: else fi

/* An agent's measure of a nominal duration d, in real ticks (its fixed rate error). */
#define DUR(a, d) ((d) == 0 -> 0 : (d) + 1 - rate[a])
/* Validity left of an answer to a request sent `age` ticks ago (S2.5: from the send time). */
#ifdef VALIDITY_FROM_RECEIVE
#define VAL(a, age) (DUR(a, TTL - M))
#else
#define VAL(a, age) (DUR(a, TTL - M) > (age) -> DUR(a, TTL - M) - (age) : 0)
#endif

#ifdef NO_FLOOR_WAIT
#define FRESH 0
#else
#define FRESH 1
#endif

/* ---------------------------------------------------------------------------------- state */

/* The arbiter's database (kept across a crash unless lost). Times are countdowns from now. */
byte hol = NONE;        /* holder */
byte gen = 0;           /* generation */
bit fpd = FRESH;        /* floorPending: a database this life created (S2.4) */
byte xm = 0;            /* expiresAt + margin - now */
byte nb = 0;            /* notBefore - now */
byte from = NONE;       /* promotedFrom (read only while fpd) */
bit tl = 0;             /* the grant was made in this arbiter life (read only while fpd) */
byte flr = 0;           /* the floor: the highest generation any agent reported */
/* A confirmation a standby reports for the current holder is folded into xm: lock-delay uses
 * max(expiresAt, every reported confirmation of the old holder + ttl) + margin, and the old
 * holder is always the current one; one of another host (an earlier holder) is dropped,
 * which only shortens a later lock-delay. (-DNO_CONF_LOCKDELAY: not folded.) */
/* Step-down: what the current lock-delay protects (an acknowledgement may end it). */
byte ldh = NONE;        /* the old holder whose validity it waits for */
byte ldg = 0;           /* ... at this generation */
byte resid = 0;         /* the replaced grant's own notBefore - now: the wait apart from ldh's validity */

/* The arbiter's life (memory only). */
byte sw = TTL + M;      /* start wait: startAt + ttl + margin - now (S2.3) */
byte line = RT + 1;     /* ticks until a report counts (S2.3, S2.4) */
byte rep[N];            /* per candidate: 0 no counting report, 1 reported never-seen, 2 reported seen > 0 */
bit nel = 0;            /* every candidate reported never-seen once: no earlier life runs, for the whole life */
bit lg = 0;             /* the record's grant was made in this life (read only during the start wait) */

/* Agents. */
byte rate[N];           /* clock rate: 0 slow, 1 exact, 2 fast */
byte seen[N];           /* seen generation (disk) */
byte kh[N];             /* known record: holder (UNK: none known) ... */
byte kg[N];             /* ... generation ... */
bit kfp[N];             /* ... floorPending */
bit stale[N];           /* the last answer was older than the seen generation */
byte cg[N]; byte cs[N]; byte cl[N];   /* current grant: generation (0 none), start in, validity left */
byte pg[N]; byte ps[N]; byte pl[N];   /* pending grant (a renewal that may not start yet) */
byte w[N];              /* lock-delay wait of the known generation (monotonic), INF while pending */
byte gh[N]; byte gu[N]; /* gave a confirmation to gh; its own wait ends in gu (0: none given) */
byte sg[N];             /* start guard (S2.2) */
byte sd[N];             /* stepped down from this generation (persisted first) */
byte rn[N];             /* the highest generation this host ran (fence said run): its lock-delay was over */
byte sdst[N];           /* 1 ack due, 2 handover due; mutant: 3 ack first, 4 persist next, 5 release first */
byte hto[N];            /* handover target while sdst = 2 or 5 */
byte spg[N];            /* ACK_BEFORE_PERSIST: the generation the late step-down is about */
bit slp[N];             /* the machine sleeps */
bit crun[N]; byte ccg[N]; byte cd[N];   /* the fenced child: running, generation, deadline */
/* The agent's one arbiter request: its answer on the way (rph), age, and the record it carries. */
bit rph[N]; byte rage[N];
byte ah[N]; byte ag[N]; bit afp[N]; byte anb[N]; byte ahold[N]; bit aconf[N];
/* Messages in flight: the arbiter's "step down from g", a handover's release (target, g). */
byte psg[N];
byte rlt[N]; byte rlg[N];

/* Ghosts for the properties. */
byte owner[G + 2];      /* holder + 1 observed with each generation, 0 = not yet */
byte maxobs = 0;
byte maxrun = 0;
bit ovf = 0;            /* a grant would exceed G: the execution ends here */
/* Fault budgets (-DARBITER_RESTARTS=k, -DAGENT_RESTARTS=k): at most k of them in a run. */
#ifdef ARBITER_RESTARTS
byte nar = 0;
#define AR_OK (nar < ARBITER_RESTARTS)
#define AR_USE nar++
#else
#define AR_OK 1
#define AR_USE skip
#endif
/* Time budget (-DTICKS=k): at most k ticks in a run; afterwards the run goes on with time stopped.
 * It keeps only the executions whose events all lie in the first k ticks (a prefix of every run). */
#ifdef TICKS
byte ntk = 0;
#define TK_OK (ntk < TICKS)
#define TK_USE ntk++
#else
#define TK_OK 1
#define TK_USE skip
#endif
/* Operator budgets (-DACQUIRES=k, -DTRANSFERS=k): at most k acquires, k transfers in a run. */
#ifdef ACQUIRES
byte nacq = 0;
#define AQ_OK (nacq < ACQUIRES)
#define AQ_USE nacq++
#else
#define AQ_OK 1
#define AQ_USE skip
#endif
#ifdef TRANSFERS
byte ntr = 0;
#define TR_OK (ntr < TRANSFERS)
#define TR_USE ntr++
#else
#define TR_OK 1
#define TR_USE skip
#endif
/* With ANSWER_AT_ONCE, -DLOSSES=k: at most k answers lost in a run. */
#ifdef LOSSES
byte nls = 0;
#define LS_OK (nls < LOSSES)
#define LS_USE nls++
#else
#define LS_OK 1
#define LS_USE skip
#endif
#ifdef AGENT_RESTARTS
byte nag = 0;
#define AG_OK (nag < AGENT_RESTARTS)
#define AG_USE nag++
#else
#define AG_OK 1
#define AG_USE skip
#endif

/* Scratch of one transition, zeroed at its end; hidden from the state unless compiled for
 * pan's breadth-first search (-DVISIBLE), which needs every variable visible. */
#ifdef VISIBLE
byte i, j, t1, t2, t3, ogen, ohol, ofpd, same, mine, lft;
byte ok1 = 1, ok2 = 1, ok3 = 1;
#else
hidden byte i, j, t1, t2, t3, ogen, ohol, ofpd, same, mine, lft;   /* lft: this grant skips every wait (G7) */
#endif
hidden byte ok1 = 1, ok2 = 1, ok3 = 1;

/* -------------------------------------------------------------------------- predicates */

#if N == 2
#define ALLREP (rep[0] != 0 && rep[1] != 0)
#define ALLNEVER (nel || (rep[0] == 1 && rep[1] == 1))
#else
#define ALLREP (rep[0] != 0 && rep[1] != 0 && rep[2] != 0)
#define ALLNEVER (nel || (rep[0] == 1 && rep[1] == 1 && rep[2] == 1))
#endif
/* startWaitUntil - now (S2.3) */
#define SWEFF (ALLNEVER -> 0 : sw)
#ifdef NO_START_WAIT
#define SWGRANT 0
#else
#define SWGRANT SWEFF
#endif
/* G7: a host that ran generation g stepped down from it; during the start wait, once every
 * candidate reported nothing above g, no earlier wait is left for its successor. */
/* Nothing newer than g reported, but the displacing grant (g + 1, of this life) the agents learned. */
#define NEWEST(g) (flr <= (g) || (flr <= gen && gen == (g) + 1 && lg))
#ifdef ACK_LIFT_WITHOUT_RAN
#define RANLIFT(a, g) (SWEFF > 0 && ALLREP && NEWEST(g))
#else
#define RANLIFT(a, g) (rn[a] >= (g) && SWEFF > 0 && ALLREP && NEWEST(g))
#endif
/* A handover's release names the record's own generation: nothing above it may be reported. */
#define RANLIFT_REL(a, g) (rn[a] >= (g) && SWEFF > 0 && ALLREP && flr <= (g))
/* renewHold - now (G4) */
#define HOLD ((SWEFF > 0 && !(ALLREP && flr <= gen)) -> SWEFF : 0)

#define ACTIVE(a) (cg[a] != 0 && cs[a] == 0 && cl[a] > 0)
#define CAN(a) (!ovf && !slp[a])
#ifdef ACK_BEFORE_CHILDREN_GONE
#define CHILDGONE(a) 1
#else
#define CHILDGONE(a) (!crun[a] || ccg[a] > sd[a])
#endif
/* asksPeers */
#define ASKS(a) (kh[a] == a && !kfp[a] && !stale[a] && kg[a] > sd[a] && kg[a] >= seen[a])

/* The end of every transition, in C (one copy instead of one per transition), see `check`:
 *  - the `hq fence run` supervisor of each host starts its child whenever the fence says run
 *    and extends the child's deadline on every re-check. A child that starts later or is not
 *    extended is covered by the child ending at any time (a child that does not run while
 *    its host may run enables nothing: the acknowledgement only waits for children of a
 *    generation the host stepped down from);
 *  - values no decision reads any more are zeroed, so equal situations are one state;
 *  - the properties are computed (ok1: a child never starts below a generation that ran,
 *    ok2: S2, ok3: S2w).
 * H_RUN is lease-core `fence` for a role that is not fail-open; H_ACTIVE is Promela ACTIVE. */
c_code {
extern int readtrail;
#ifdef VISIBLE
#define HV(x) now.x
#else
#define HV(x) x
#endif
#define H_ACTIVE(a) (now.cg[a] != 0 && now.cs[a] == 0 && now.cl[a] > 0)
#ifdef NO_STANDBY_WAIT
#define H_GAVEOK(a) 1
#else
#define H_GAVEOK(a) (now.gu[a] == 0)
#endif
#define H_RUN(a) (!now.slp[a] && !now.stale[a] && now.kh[a] == (a) && now.kg[a] >= now.seen[a] && now.sg[a] == 0 && H_GAVEOK(a) && H_ACTIVE(a) && now.cg[a] == now.kg[a])
#define H_WORK(a) (now.crun[a] && !now.slp[a])
#ifdef SYMMETRY
/* -DSYMMETRY: symmetry reduction between the candidates. The model is symmetric in the host
 * names: every transition is offered for every host and every ordered pair of hosts, no
 * decision compares host names other than for equality or against NONE and UNK, the initial
 * state is the same for every host (the clock rates are chosen for every host from the same
 * three), and S1, S2 and S2w speak of all hosts alike. So renaming the hosts in a state by any
 * permutation gives a state with the same futures, renamed. At the end of every transition the
 * state is replaced by the least (memcmp order) of its N! renamings, so pan stores one state
 * per class of renamings (Ip and Dill, "Better verification through symmetry", 1996). A replay
 * (./pan -r) shows the renamed states: the host numbers of a trail may change from one step to
 * the next, consistently with the dump printed after each step. (The one order a transition's
 * effect depends on, which child hq_after starts first when two start in the same instant,
 * only decides whether that instant also fails ok1: it fails ok3 either way.) hq_perm moves
 * every per-host array of the state (all 36: checked against pan.h's State for N = 3 with every
 * feature on) and renames every value that names a host (kh gh hto ah rlt, hol from ldh, owner);
 * a dead ah (0 while no answer is on the way, rph = 0) names no host and stays 0. */
#define HP_ARR(x) d->x[p[a_]] = s->x[a_]
#define HP_VAL(v) ((v) < N ? p[(v)] : (v))
extern ulong vsize;
static void hq_perm(State *d, const State *s, const int *p) {
  int a_, g_;
  memcpy((char *) d, (const char *) s, vsize);
  for (a_ = 0; a_ < N; a_++) {
    HP_ARR(rep); HP_ARR(rate); HP_ARR(seen); HP_ARR(kg); HP_ARR(kfp); HP_ARR(stale);
    HP_ARR(cg); HP_ARR(cs); HP_ARR(cl); HP_ARR(pg); HP_ARR(ps); HP_ARR(pl); HP_ARR(w);
    HP_ARR(gu); HP_ARR(sg); HP_ARR(sd); HP_ARR(sdst); HP_ARR(spg); HP_ARR(slp); HP_ARR(crun);
    HP_ARR(ccg); HP_ARR(cd); HP_ARR(rph); HP_ARR(rage); HP_ARR(ag); HP_ARR(afp); HP_ARR(anb);
    HP_ARR(ahold); HP_ARR(aconf); HP_ARR(psg); HP_ARR(rlg); HP_ARR(rn);
    /* per host, and naming a host */
    d->kh[p[a_]] = HP_VAL(s->kh[a_]); d->gh[p[a_]] = HP_VAL(s->gh[a_]);
    d->hto[p[a_]] = HP_VAL(s->hto[a_]);
    /* ah is zeroed to 0 (not NONE) while no answer is on the way: that 0 names no host */
    d->ah[p[a_]] = s->rph[a_] ? HP_VAL(s->ah[a_]) : s->ah[a_];
    d->rlt[p[a_]] = HP_VAL(s->rlt[a_]);
  }
  d->hol = HP_VAL(s->hol); d->from = HP_VAL(s->from); d->ldh = HP_VAL(s->ldh);
  for (g_ = 0; g_ < G + 2; g_++) d->owner[g_] = s->owner[g_] == 0 ? 0 : p[s->owner[g_] - 1] + 1;
}
static const int hq_perms[][3] = {
#if N == 2
  {1, 0, 2}
#else
  {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}
#endif
};
static void hq_canon(void) {
  static State best, cand;
  int k_, found = 0;
  for (k_ = 0; k_ < (int) (sizeof hq_perms / sizeof hq_perms[0]); k_++) {
    hq_perm(&cand, &now, hq_perms[k_]);
    if (memcmp((char *) &cand, found ? (char *) &best : (char *) &now, vsize) < 0) {
      memcpy((char *) &best, (char *) &cand, vsize); found = 1;
    }
  }
  if (found) memcpy((char *) &now, (char *) &best, vsize);
}
#endif
static void hq_after(void) {
  int a_, b_;
  HV(ok1) = 1; HV(ok2) = 1; HV(ok3) = 1;
  if (!now.ovf) {
    for (a_ = 0; a_ < N; a_++) {
#if !defined(NO_STEP_DOWN) && !defined(NO_ARBITER_RESTART)
      /* (only read by G7, which needs a start wait with every report in: an arbiter restart) */
      if (H_RUN(a_) && now.kg[a_] > now.rn[a_]) now.rn[a_] = now.kg[a_];
#endif
      if (H_RUN(a_) && !now.crun[a_]) {
        if (now.kg[a_] < now.maxrun) HV(ok1) = 0;
        if (now.kg[a_] > now.maxrun) now.maxrun = now.kg[a_];
        now.crun[a_] = 1; now.ccg[a_] = now.kg[a_]; now.cd[a_] = now.cl[a_];
      } else if (H_RUN(a_) && now.crun[a_] && now.ccg[a_] == now.kg[a_] && now.cl[a_] > now.cd[a_]) {
        now.cd[a_] = now.cl[a_];
      }
      if (now.cg[a_] == 0) { now.cs[a_] = 0; now.cl[a_] = 0; }
      if (now.pg[a_] == 0) { now.ps[a_] = 0; now.pl[a_] = 0; }
      if (now.gu[a_] == 0) now.gh[a_] = NONE;
      if (now.kh[a_] == UNK) { now.kg[a_] = 0; now.kfp[a_] = 0; }
      /* the wait is read for the agent's own tenure only (a standby's pending lock-delay
       * only lengthens its start guard after a crash: dropping it keeps every run) */
      if (now.kh[a_] != a_) now.w[a_] = 0;
      if (!now.crun[a_]) { now.ccg[a_] = 0; now.cd[a_] = 0; }
      if (now.sdst[a_] != 2 && now.sdst[a_] != 5) now.hto[a_] = NONE;
      if (!now.rph[a_]) { now.rage[a_] = 0; now.ah[a_] = 0; now.ag[a_] = 0; now.afp[a_] = 0; }
      if (!now.rph[a_] || now.ah[a_] != a_) { now.anb[a_] = 0; now.aconf[a_] = 0; }
      if (!now.aconf[a_]) now.ahold[a_] = 0;
      if (now.psg[a_] != 0 && now.psg[a_] <= now.sd[a_]) now.psg[a_] = 0;
    }
    if (!now.fpd) { now.from = NONE; now.tl = 0; }
    if (!now.fpd && now.sw == 0) { for (a_ = 0; a_ < N; a_++) now.rep[a_] = 0; now.nel = 0; }
#if defined(NO_STEP_DOWN) || defined(NO_ARBITER_RESTART)
    now.lg = 0;   /* read only by G7, which needs both */
#else
    if (now.sw == 0) now.lg = 0;
#endif
    if (now.nb == 0) { now.ldh = NONE; now.ldg = 0; now.resid = 0; }
    if (now.hol == NONE) now.xm = 0;
  }
  for (a_ = 0; a_ < N; a_++) for (b_ = a_ + 1; b_ < N; b_++) {
    if (H_RUN(a_) && H_RUN(b_)) HV(ok2) = 0;
    if (H_WORK(a_) && H_WORK(b_)) HV(ok3) = 0;
  }
#ifdef SYMMETRY
  hq_canon();
#endif
}

/* On a replay (./pan -r) every transition prints the state it leads to. */
static void hq_dump(void) {
  int a_;
  if (!readtrail) return;
  printf("   arbiter holder=%d gen=%d floorPending=%d xm=%d nb=%d protects=%d/%d resid=%d floor=%d startWait=%d line=%d\n",
    now.hol, now.gen, now.fpd, now.xm, now.nb, now.ldh, now.ldg, now.resid, now.flr, now.sw, now.line);
  for (a_ = 0; a_ < N; a_++) {
    printf("   host%d%s seen=%d known=%d/%d%s cur=%d:%d:%d pend=%d:%d:%d wait=%d gave=%d:%d guard=%d steppedDown=%d/%d child=%d:%d:%d answer=%d:%d/%d age=%d nb=%d conf=%d hold=%d push=%d release=%d/%d\n",
      a_, now.slp[a_] ? " (asleep)" : "", now.seen[a_], now.kh[a_], now.kg[a_], now.kfp[a_] ? "p" : "",
      now.cg[a_], now.cs[a_], now.cl[a_], now.pg[a_], now.ps[a_], now.pl[a_], now.w[a_], now.gh[a_], now.gu[a_], now.sg[a_],
      now.sd[a_], now.sdst[a_], now.crun[a_], now.ccg[a_], now.cd[a_], now.rph[a_], now.ah[a_], now.ag[a_], now.rage[a_],
      now.anb[a_], now.aconf[a_], now.ahold[a_], now.psg[a_], now.rlt[a_], now.rlg[a_]);
  }
}
}

inline check() {
  c_code { hq_after(); hq_dump(); };
  i = 0; j = 0; t1 = 0; t2 = 0; t3 = 0; ogen = 0; ohol = 0; ofpd = 0; same = 0; mine = 0; lft = 0;
  assert(ok1);   /* S1: a fenced child never starts a generation below one that already ran */
  assert(ok2);   /* S2: no two hosts answer run: true at once */
  assert(ok3)    /* S2w: no two hosts have a fenced child at work at once */
}

/* S1 at the agents: one holder per observed generation (the simulator's `observe`). */
inline observe(a) {
  if
  :: (!ovf && kh[a] < N && !kfp[a] && !stale[a]) ->
     if
     :: owner[kg[a]] == 0 -> owner[kg[a]] = kh[a] + 1; maxobs = MAX(maxobs, kg[a])
     :: else -> assert(owner[kg[a]] == kh[a] + 1)
     fi
  :: else
  fi
}

/* Before an arbiter decision: what the record said. */
inline before() {
  ogen = gen; ohol = hol; ofpd = fpd
}

/* S1 at the arbiter: a grant (a new tenure, or a pending floor completed) lies above every
 * generation an agent has observed, or is that very tenure (the simulator's `noteGrant`). */
inline granted() {
  if
  :: (!ovf && hol != NONE && !fpd && !(gen == ogen && hol == ohol && !ofpd)) ->
     assert(gen > maxobs || (gen == maxobs && owner[gen] == hol + 1))
  :: else
  fi
}

/* ----------------------------------------------------------------------------- arbiter */

/* lockDelayUntil(x) - now: the old holder's expiresAt and every confirmation a standby
 * reported giving it, + margin (xm and cm already hold the margin). */
inline lockdelay(x, out) {
  out = 0;
#ifndef NO_LOCK_DELAY
  if
  :: x != NONE ->
     if :: hol == x -> out = xm :: else fi
  :: else
  fi
#endif
}

/* grant(h) behind the wait `ldv`, from the old holder `frm` (NONE: none); with `protect` the
 * wait is a lock-delay for frm's validity, which frm's acknowledgement may end, and the
 * arbiter asks frm to step down at once. */
inline grant(h, ldv, frm, protect) {
  t3 = (lft -> 0 : MAX(ldv, SWGRANT));
  if
  :: (protect && frm != NONE) ->
     ldh = frm; ldg = gen; resid = nb;
#ifndef NO_STEP_DOWN
     psg[frm] = gen
#endif
  :: else -> ldh = NONE; ldg = 0; resid = 0
  fi;
  gen = MAX(gen, flr) + 1;
  if :: gen > G -> ovf = 1 :: else fi;
  hol = h; nb = t3; xm = t3 + TTL + M; from = frm; tl = 1; lg = 1
}

/* noteReport: raise the floor, count the report for this life, complete a pending floor
 * (lifting a first grant's start wait when every candidate never saw a generation), re-grant
 * a record older than a report. s: the seen generation (255: not sent), g: the generation. */
inline note(h, s, g, counts) {
#ifndef NO_FLOOR
  t1 = (s != 255 -> s : 0);
  if :: (!fpd && g > t1) -> t1 = g :: else fi;
  if :: t1 > flr -> flr = t1 :: else fi;
#endif
  if
  :: (s != 255 && counts) -> rep[h] = ((s > 0 || rep[h] == 2) -> 2 : 1); if :: ALLNEVER -> nel = 1 :: else fi
  :: else
  fi;
  if
  :: fpd ->
     if
     :: (hol != NONE && flr >= gen) -> gen = flr + 1; if :: gen > G -> ovf = 1 :: else fi
     :: else
     fi;
     if
     :: ALLREP ->
        fpd = 0;
        if
        :: (ALLNEVER && hol != NONE && from == NONE && tl && nb > 0) -> nb = 0; xm = TTL + M
        :: else
        fi
     :: else
     fi
  :: else ->
     if
     :: (hol != NONE && flr > gen) ->
        gen = flr + 1; if :: gen > G -> ovf = 1 :: else fi;
        nb = MAX(nb, SWGRANT)
     :: else
     fi
  fi
}

/* The answer a request gets: the record as it is after the decision. */
inline snap(a, confirms) {
  ah[a] = hol; ag[a] = gen; afp[a] = fpd; anb[a] = nb; aconf[a] = confirms;
  ahold[a] = (confirms -> HOLD : 0);
  rph[a] = 1; rage[a] = 0
}

/* POST /v1/heartbeat from agent a: its report, its confirmation, the holder's renewal. */
inline arb_heartbeat(a) {
  printf("@ host%d heartbeat\n", a);
  before();
  t2 = (kh[a] == a -> kg[a] : 0);
  note(a, seen[a], t2, line == 0);
#ifndef NO_CONF_LOCKDELAY
  if
  :: (gu[a] > 0 && gh[a] == hol) -> t3 = (gu[a] == DUR(a, TTL + M) -> TTL + M : gu[a]); xm = MAX(xm, t3)
  :: else
  fi;
#endif
  if
  :: (hol == a && !(t2 != 0 && t2 != gen)) -> xm = nb + TTL + M; snap(a, 1)
  :: else -> snap(a, 0)
  fi;
  granted()
}

/* POST /v1/lease/acquire by a's CLI when no one holds (its answer goes to the operator; the
 * agent learns from its next heartbeat). An acquire of a held lease is a heartbeat's report
 * plus a renewal or a transfer, both modelled. */
inline arb_acquire(a) {
  printf("@ host%d acquire\n", a);
  before();
  note(a, seen[a], 0, line == 0);
  if
  :: hol == NONE -> grant(a, 0, NONE, 0)
  :: else
  fi;
  granted()
}

/* POST /v1/lease/transfer (admin), and every promotion `check` may make. */
inline arb_transfer(x) {
  printf("@ transfer to host%d\n", x);
  before();
  /* (lease-core refuses x = the holder of an unexpired lease (`same-holder`): the caller offers
   * a transfer to the holder only once xm, its expiry + margin, has passed — a margin later than
   * lease-core, which only shortens what the model allows. Offering it earlier let a host hold
   * a new generation with no lock-delay while its old one was still valid, which hq refuses.) */
  t2 = (hol == x -> NONE : hol);
  lockdelay(t2, j);
  grant(x, j, t2, 1);
  granted()
}

/* POST /v1/lease/release with handoverTo: granted with no lock-delay for the releasing holder
 * (it stepped down first); the start wait applies, as to every grant, and so does a lock-delay
 * the releasing holder's own grant was still waiting out (`nb`: it protects the holder before
 * it, as lease-core's release keeps `notBefore`). Found by step-down-3c: a transfer to host1,
 * host1's handover to host2 during its lock-delay, and host2 ran beside host0's child. */
inline arb_release(a, g, x) {
  printf("@ host%d's release of %d to host%d lands\n", a, g, x);
  before();
  note(a, 255, g, 0);
  if
  :: (hol == a && g == gen) -> lft = RANLIFT_REL(a, g); grant(x, nb, a, 0)
  :: else
  fi;
  granted()
}

/* Step-down acknowledgement: "generation g stepped down, no child alive", authenticated as `tok`, naming `body`.
 * Only the protected holder's ack for the protected generation, while the wait runs, counts;
 * it ends the wait down to what it held apart from that holder's validity. */
inline arb_ack(tok, body, g) {
  printf("@ ack of generation %d by host%d as host%d\n", g, body, tok);
  if
  :: (
#ifndef ACCEPT_FORGED_ACK
      tok == body &&
#endif
#ifndef ACCEPT_ANY_GEN_ACK
      g == ldg &&
#endif
      body == ldh && hol != ldh && nb > 0) ->
     if
     :: RANLIFT(body, g) ->
        /* G7: it ran g (its own lock-delay was over) and acknowledges: nothing is left to wait for */
        nb = 0; xm = TTL + M; ldh = NONE; ldg = 0; resid = 0
     :: else ->
#ifdef ACK_ENDS_WHOLE_DELAY
        nb = SWGRANT;
#else
        nb = MAX(resid, SWGRANT);
#endif
        xm = nb + TTL + M;
#ifdef NO_ARBITER_RESTART
        ldh = NONE; ldg = 0; resid = 0;
#endif
        /* (else a later copy, once the reports are in, may still end the start wait: G7) */
        skip
     fi
  :: else
  fi
}

/* The arbiter crashes and starts again: its database lost (`wipe`), or kept with every time
 * moved by a forward jump of `jmp` while it was down and clamped by `atRestart`. */
inline arb_restart(wipe, jmp) {
  printf("@ arbiter restart, database lost=%d, forward jump %d\n", wipe, jmp);
  if
  :: wipe ->
     hol = NONE; gen = 0; fpd = FRESH; xm = 0; nb = 0; from = NONE; flr = 0;
     ldh = NONE; ldg = 0; resid = 0;
     /* A step-down request rides on an answer, with the record the agent adopts, within one
      * request timeout: one of the lost numbering never reaches an agent of the new one alone. */
     for (i : 0 .. N - 1) { psg[i] = 0 }
  :: else ->
     t1 = (nb > 0);
     xm = (xm > jmp -> xm - jmp : 0); nb = (nb > jmp -> nb - jmp : 0); resid = (resid > jmp -> resid - jmp : 0);
     if :: xm > TTL + M -> xm = TTL + M :: else fi;
     if :: nb > TTL + M -> nb = TTL + M :: else fi;
     if :: resid > TTL + M -> resid = TTL + M :: else fi;
#ifndef RESTART_KEEPS_NB
     /* A lock-delay still running when the arbiter went down gets the start wait: a forward
      * jump while it was down moved its end closer, and the renewal hold lifts as soon as
      * every candidate has reported (found by this model; lease-core's atRestart only
      * clamps, see SAFETY.md). */
     if :: t1 -> nb = MAX(nb, TTL + M) :: else fi
#endif
     skip
  fi;
  tl = 0;
  sw = TTL + M; line = RT + 1; nel = 0; lg = 0;
  for (i : 0 .. N - 1) { rep[i] = 0 }
}

/* ------------------------------------------------------------------------------- agent */

inline drop(a) {
  cg[a] = 0; cs[a] = 0; cl[a] = 0; pg[a] = 0; ps[a] = 0; pl[a] = 0
}

/* Step-down (1): persist "stepped down from g" before anything else: nothing of g runs again.
 * Steps (2) and (3) follow: the children of g end (they may, at any time; the supervisor's
 * re-check ends them too), and the acknowledgement waits until none is left. */
inline step_down(a, g) {
#ifdef ACK_BEFORE_PERSIST
  sdst[a] = 3; spg[a] = g
#else
  sd[a] = g; sdst[a] = 1;
  if :: cg[a] <= g -> cg[a] = 0; cs[a] = 0; cl[a] = 0 :: else fi;
  if :: pg[a] <= g -> pg[a] = 0; ps[a] = 0; pl[a] = 0 :: else fi
#endif
}

/* A new grant (generation g, start in st, validity vl: plain variables) from an arbiter
 * answer (pending_ok) or a peer round. */
inline take(a, g, st, vl, pending_ok) {
  if
  :: vl == 0 -> skip
  :: (vl > 0 && st == 0) -> cg[a] = g; cs[a] = 0; cl[a] = vl; pg[a] = 0; ps[a] = 0; pl[a] = 0
  :: (vl > 0 && st > 0 && ACTIVE(a)) -> if :: pending_ok -> pg[a] = g; ps[a] = st; pl[a] = vl :: else fi
  :: (vl > 0 && st > 0 && !ACTIVE(a)) -> cg[a] = 0; cs[a] = 0; cl[a] = 0; pg[a] = g; ps[a] = st; pl[a] = vl
  fi
}

/* onArbiterAnswer, within the request timeout. */
inline agent_answer(a) {
  printf("@ host%d gets its answer\n", a);
  if
  :: ag[a] < seen[a] -> stale[a] = 1; drop(a)
  :: else ->
     /* Learning the loss starts the step-down, before the record is adopted. */
     if
     :: (kh[a] == a && kg[a] > sd[a] && ah[a] != a && sdst[a] <= 1) -> step_down(a, kg[a])
     :: else
     fi;
     stale[a] = 0;
     if :: (!afp[a] && ag[a] > seen[a]) -> seen[a] = ag[a] :: else fi;
     same = (kh[a] == ah[a] && kg[a] == ag[a]);
     mine = (ah[a] == a);
     if :: (!same || !mine || afp[a]) -> drop(a) :: else fi;
     /* The latest answer's notBefore replaces the earlier one (answers arrive in
      * order), so an acknowledged step-down reaches the new holder with its next answer. */
     w[a] = (afp[a] -> INF : DUR(a, anb[a]));
     kh[a] = ah[a]; kg[a] = ag[a]; kfp[a] = afp[a];
     if
     :: (aconf[a] && mine && ag[a] > sd[a]) ->
        t1 = MAX(w[a], DUR(a, ahold[a]));
        t2 = VAL(a, rage[a]);
        take(a, ag[a], t1, t2, 1)
     :: else
     fi;
     observe(a)
  fi;
  rph[a] = 0
}

/* onConfirmRequest at peer p from asker a (the standby persists before it answers: S2.2). */
inline confirm(a, p) {
  printf("@ host%d asks host%d to confirm it\n", a, p);
  if
  :: seen[p] > kg[a] -> t1 = 0
  :: else ->
     if
     :: (kh[p] < N && kh[p] != a && kg[p] >= kg[a]) -> t1 = 0
     :: else -> t1 = !ACTIVE(p)
     fi
  fi;
  if
  :: t1 -> seen[p] = MAX(seen[p], kg[a]); drop(p); gh[p] = a; gu[p] = DUR(p, TTL + M)
  :: else
  fi
}

/* a asks every standby peer to confirm it (rule 3, L2), and all answers arrive at once:
 * onPeerResults. ok: every peer confirmed at a generation no higher than a's. */
inline peers_answer(a, ok) {
  if
  :: (kh[a] != a || kfp[a] || stale[a] || kg[a] < seen[a] || kg[a] <= sd[a]) -> drop(a)   /* (only a seen generation it just adopted fails here) */
  :: (ok && !(kh[a] != a || kfp[a] || stale[a] || kg[a] < seen[a] || kg[a] <= sd[a])) ->
     t3 = VAL(a, 0);
     take(a, kg[a], w[a], t3, 0)
  :: else
  fi
}

/* kill -9 of the agent, and its start from disk (initialAgent). */
inline restart(a) {
  printf("@ host%d agent kill -9 and restart\n", a);
  /* persisted(): a confirmation given, or a lock-delay pending (S2.2) */
  t1 = (gu[a] > 0 || pg[a] != 0 || (cg[a] != 0 && cs[a] > 0) || w[a] > 0 || sg[a] > 0);
  if :: (kh[a] != UNK && kg[a] > seen[a]) -> seen[a] = kg[a] :: else fi;
  /* local.json keeps the known holder and generation: a record with a holder whose floor was
   * complete is known again after the start (a restarted holder asks its peers, L2); one whose
   * floor was pending is not final and is forgotten (-DRESTORE_PENDING: kept as final). */
#ifdef RESTORE_PENDING
  t2 = (kh[a] < N);
#else
  t2 = (kh[a] < N && !kfp[a]);
#endif
  if :: !t2 -> kh[a] = UNK; kg[a] = 0 :: else fi;
  kfp[a] = 0; stale[a] = 0; drop(a); w[a] = 0; gh[a] = NONE; gu[a] = 0;
#ifdef NO_START_GUARD
  sg[a] = 0;
#else
  sg[a] = (t1 -> DUR(a, TTL + M) : 0);
#endif
#ifdef SD_IN_MEMORY
  sd[a] = 0;
  if :: sdst[a] == 1 -> sdst[a] = 0 :: else fi;
#endif
  rph[a] = 0
}

/* A forward wall-clock jump of one tick on agent a: elapsed = max(mono, wall) moves. */
inline jump(a) {
  printf("@ host%d wall clock jumps forward\n", a);
#ifndef MONO_VALIDITY
  SUB1(cl[a]); SUB1(pl[a]);
#endif
#ifdef WALL_WAITS
  SUB1(cs[a]); SUB1(ps[a]); SUB1(w[a]); SUB1(gu[a]); SUB1(sg[a]);
#endif
  if :: rph[a] -> rage[a]++; if :: rage[a] > RT -> rph[a] = 0 :: else fi :: else fi;
  settle(a)
}

/* settle: a pending grant whose start came becomes current; spent grants go. */
inline settle(a) {
  if :: (cg[a] != 0 && cl[a] == 0) -> cg[a] = 0; cs[a] = 0 :: else fi;
  if :: (pg[a] != 0 && pl[a] == 0) -> pg[a] = 0; ps[a] = 0 :: else fi;
  if :: (pg[a] != 0 && ps[a] == 0) -> cg[a] = pg[a]; cs[a] = 0; cl[a] = pl[a]; pg[a] = 0; pl[a] = 0 :: else fi
}

/* One tick of real time. Monotonic waits stop while a machine sleeps; validities, request
 * ages and the supervisor's deadline (max of the two clocks) run on. An answer older than
 * the request timeout is dropped. */
inline tick() {
  printf("@ tick\n");
  DEC(xm); DEC(nb); DEC(resid); DEC(sw); DEC(line);
  for (i : 0 .. N - 1) {
#ifdef WALL_WAITS
    DEC(cs[i]); DECI(ps[i]); DECI(w[i]); DEC(gu[i]); DEC(sg[i]);
#else
    if :: !slp[i] -> DEC(cs[i]); DECI(ps[i]); DECI(w[i]); DEC(gu[i]); DEC(sg[i]) :: else fi;
#endif
#ifdef MONO_VALIDITY
    if :: !slp[i] -> DEC(cl[i]); DEC(pl[i]) :: else fi;
    if :: (crun[i] && !slp[i]) -> cd[i]-- :: else fi;
#else
    DEC(cl[i]); DEC(pl[i]);
    if :: crun[i] -> cd[i]-- :: else fi;
#endif
    if :: (crun[i] && cd[i] == 0) -> crun[i] = 0 :: else fi;
    if :: rph[i] -> rage[i]++; if :: rage[i] > RT -> rph[i] = 0 :: else fi :: else fi;
    settle(i)
  }
}

/* ------------------------------------------------------------------------- transitions */

#ifdef NO_READS
#define READ(a)
#else
#define READ(a) :: d_step { (CAN(a) && !rph[a]) -> printf("@ host%d reads the record\n", a); snap(a, 0); check() }
#endif

#ifdef ANSWER_AT_ONCE
/* Size switch: an answer arrives in the instant of its request (no other event between the two;
 * the arbiter's decision changes no agent, so the state between them needs no check) or never:
 * then it stays on the way until it is dropped, as before (no new request meanwhile), but what it
 * carries, never read, is cleared (ah = NONE names no host for the symmetry reduction). A decision
 * that overflows G delivers nothing, as in the whole model (CAN ends every run there). A read's
 * answer is never delivered under this switch (fewer runs; the configurations using it add NO_READS). */
#define HEARTBEAT(a) \
  :: d_step { (CAN(a) && !rph[a]) -> arb_heartbeat(a); if :: !ovf -> agent_answer(a) :: else fi; check() } \
  :: d_step { (CAN(a) && !rph[a] && LS_OK) -> LS_USE; arb_heartbeat(a); \
       ah[a] = NONE; ag[a] = 0; afp[a] = 0; anb[a] = 0; aconf[a] = 0; ahold[a] = 0; check() } \
  READ(a)
#else
#define HEARTBEAT(a) \
  :: d_step { (CAN(a) && !rph[a]) -> arb_heartbeat(a); check() } \
  READ(a) \
  :: d_step { (CAN(a) && rph[a]) -> agent_answer(a); check() }
#endif

#ifdef NO_SLEEP
#define SLEEP(a)
#else
#define SLEEP(a) \
  :: d_step { (CAN(a)) -> printf("@ host%d sleeps\n", a); slp[a] = 1; check() } \
  :: d_step { (!ovf && slp[a]) -> printf("@ host%d wakes\n", a); slp[a] = 0; check() }
#endif

#ifdef NO_JUMPS
#define JUMP(a)
#else
#define JUMP(a) :: d_step { (!ovf) -> jump(a); check() }
#endif

#ifdef NO_STEP_DOWN
#define STEPDOWN(a)
#else
#define STEPDOWN(a) \
  /* Step-down (3): the acknowledgement, once no child of the stepped-down generation is alive */ \
  :: d_step { (CAN(a) && sdst[a] == 1 && CHILDGONE(a)) -> arb_ack(a, a, sd[a]); sdst[a] = 0; check() } \
  /* The arbiter's "step down from g" reaches the old holder */ \
  :: d_step { (CAN(a) && psg[a] != 0) -> \
       printf("@ host%d gets the arbiter's step-down request for %d\n", a, psg[a]); \
       if :: (psg[a] > sd[a] && sdst[a] <= 1) -> step_down(a, psg[a]) :: else fi; psg[a] = 0; check() } \
  /* handover: stepped down, children gone, then the release goes out (and lands later) */ \
  :: d_step { (CAN(a) && sdst[a] == 2 && CHILDGONE(a) && rlt[a] == NONE) -> \
       printf("@ host%d sends its release to host%d\n", a, hto[a]); rlt[a] = hto[a]; rlg[a] = sd[a]; sdst[a] = 0; check() } \
  :: d_step { (!ovf && rlt[a] != NONE) -> arb_release(a, rlg[a], rlt[a]); rlt[a] = NONE; rlg[a] = 0; check() } \
  PERSIST_LATE(a)
#endif

#ifdef ACK_BEFORE_PERSIST
/* The mutant: the acknowledgement (or the handover's release) goes out first, the step-down
 * mark is written after it. */
#define PERSIST_LATE(a) \
  :: d_step { (CAN(a) && sdst[a] == 3 && CHILDGONE(a)) -> arb_ack(a, a, spg[a]); sdst[a] = 4; check() } \
  :: d_step { (CAN(a) && sdst[a] == 5 && rlt[a] == NONE) -> rlt[a] = hto[a]; rlg[a] = kg[a]; spg[a] = kg[a]; sdst[a] = 4; check() } \
  :: d_step { (CAN(a) && sdst[a] == 4) -> sd[a] = spg[a]; spg[a] = 0; sdst[a] = 0; \
       if :: cg[a] <= sd[a] -> cg[a] = 0; cs[a] = 0; cl[a] = 0 :: else fi; \
       if :: pg[a] <= sd[a] -> pg[a] = 0; ps[a] = 0; pl[a] = 0 :: else fi; check() }
#define HSTART(a, x) :: d_step { (CAN(a) && kh[a] == a && kg[a] > sd[a] && sdst[a] == 0 && rlt[a] == NONE) -> sdst[a] = 5; hto[a] = x; check() }
#else
#define PERSIST_LATE(a)
/* `hq lease release --handover-to x`: (1) step down (persisted), then (2), then the release. */
#define HSTART(a, x) :: d_step { (CAN(a) && kh[a] == a && kg[a] > sd[a] && sdst[a] == 0 && rlt[a] == NONE) -> \
       printf("@ host%d: hq lease release --handover-to host%d\n", a, x); sd[a] = kg[a]; drop(a); sdst[a] = 2; hto[a] = x; check() }
#endif

#if defined(NO_STEP_DOWN) || defined(NO_HANDOVER)
/* (NO_HANDOVER, a size switch: no `hq lease release --handover-to`; pushes and acks stay) */
#undef HSTART
#define HSTART(a, x)
#endif

/* A late or duplicated copy of an acknowledgement a sent: of a generation below the one it
 * stepped down from last, or of that one once its ack went out — and one no other host was seen
 * holding: a host only steps down from a generation it held, and a generation has one holder
 * (S1), so no copy of an ack of a's can name another host's generation. */
#define REPLAY(a, g) :: d_step { (!ovf && (owner[g] == 0 || owner[g] == a + 1) && (g < sd[a] || (g == sd[a] && sdst[a] == 0))) -> arb_ack(a, a, g); check() }
/* An acknowledgement authenticated as a that names host h (forged host). */
#define FORGE(a, h, g) :: d_step { (!ovf) -> arb_ack(a, h, g); check() }

/* a's peer round: every peer confirms and every answer arrives, or some peers record their
 * confirmation and a gets nothing (requests or answers lost). */
#ifdef NO_ROUNDS
#define ROUND2(a, p)
#define ROUND3(a, p, q)
#else
#define ROUND2(a, p) \
  :: d_step { (CAN(a) && CAN(p) && ASKS(a)) -> confirm(a, p); t2 = t1; \
       if :: seen[p] > seen[a] -> seen[a] = seen[p] :: else fi; peers_answer(a, t2); check() } \
  :: d_step { (CAN(a) && CAN(p) && ASKS(a)) -> confirm(a, p); check() }
#define ROUND3(a, p, q) \
  :: d_step { (CAN(a) && CAN(p) && CAN(q) && ASKS(a)) -> confirm(a, p); t2 = t1; confirm(a, q); t2 = t2 && t1; \
       if :: seen[p] > seen[a] -> seen[a] = seen[p] :: else fi; \
       if :: seen[q] > seen[a] -> seen[a] = seen[q] :: else fi; \
       peers_answer(a, t2); check() } \
  :: d_step { (CAN(a) && CAN(p) && ASKS(a)) -> confirm(a, p); check() } \
  :: d_step { (CAN(a) && CAN(q) && ASKS(a)) -> confirm(a, q); check() } \
  :: d_step { (CAN(a) && CAN(p) && CAN(q) && ASKS(a)) -> confirm(a, p); confirm(a, q); check() }
#endif

#ifdef NO_AGENT_RESTART
#define RESTART(a)
#else
/* kill -9 of the agent, and its start again */
#define RESTART(a) :: d_step { (CAN(a) && AG_OK) -> AG_USE; restart(a); check() }
#endif

#define AGENT(a) \
  /* heartbeat or refresh, answered in the instant it is sent; the answer may come late or never */ \
  HEARTBEAT(a) \
  /* the fenced child may end at any time (its start and re-checks are in supervise) */ \
  :: d_step { (CAN(a) && crun[a]) -> printf("@ host%d's child ends\n", a); crun[a] = 0; check() } \
  STEPDOWN(a) \
  /* the operator's `hq lease acquire` on this machine */ \
  :: d_step { (CAN(a) && hol == NONE && AQ_OK) -> AQ_USE; arb_acquire(a); check() } \
  RESTART(a) \
  SLEEP(a) \
  JUMP(a) \
  :: d_step { (!ovf && (hol != a || xm == 0) && TR_OK) -> TR_USE; arb_transfer(a); check() }

#if G >= 4
#define GEN4(x) x
#else
#define GEN4(x)
#endif
#if G >= 5
#define GEN5(x) x
#else
#define GEN5(x)
#endif
#ifdef NO_REPLAY
/* Size switch: no late or duplicate acknowledgement (each is sent once, when due). */
#define REPLAYS(a)
#else
#define REPLAYS(a) REPLAY(a, 1) REPLAY(a, 2) REPLAY(a, 3) GEN4(REPLAY(a, 4)) GEN5(REPLAY(a, 5))
#endif
#ifdef NO_FORGE
/* Size switch: no acknowledgement naming another host (without ACCEPT_FORGED_ACK each is refused
 * and changes nothing, so leaving them out leaves the states as they are, only faster). */
#define FORGES(a, h)
#else
#define FORGES(a, h) FORGE(a, h, 1) FORGE(a, h, 2) FORGE(a, h, 3) GEN4(FORGE(a, h, 4)) GEN5(FORGE(a, h, 5))
#endif

#if defined(NO_LOST_RESTART) != defined(NO_RESTART_JUMP)
#error "NO_LOST_RESTART and NO_RESTART_JUMP narrow the restarts only together"
#endif
#ifdef NO_ARBITER_RESTART
#define ARESTS
#else
/* The arbiter starts again with its database lost, or kept after a forward jump of 0 .. TTL + M. */
#define AREST(j) :: d_step { (!ovf && AR_OK) -> AR_USE; arb_restart(0, j); check() }
#ifdef NO_KEPT_RESTART
/* Size switch: the arbiter restarts only with its database lost (the restarts that keep it, with
 * or without a jump, are left out). */
#define ARESTS \
  :: d_step { (!ovf && AR_OK) -> AR_USE; arb_restart(1, 0); check() }
#elif defined(NO_LOST_RESTART) && defined(NO_RESTART_JUMP)
/* Size switches: the arbiter restarts only with its database kept, and no clock jumped meanwhile. */
#define ARESTS AREST(0)
#else
#define ARESTS \
  :: d_step { (!ovf && AR_OK) -> AR_USE; arb_restart(1, 0); check() } \
  AREST(0) AREST(1) AREST(2) AREST(3) AREST(4) AREST5 AREST6
#endif
#if TTL + M >= 5
#define AREST5 AREST(5)
#else
#define AREST5
#endif
#if TTL + M >= 6
#define AREST6 AREST(6)
#else
#define AREST6
#endif
#endif

#ifdef NO_STEP_DOWN
#define ACKS(a, h)
#else
#define ACKS(a, h) REPLAYS(a) FORGES(a, h)
#endif

active proctype world() {
  d_step {
    for (i : 0 .. N - 1) {
      kh[i] = UNK; gh[i] = NONE; hto[i] = NONE; rlt[i] = NONE; rate[i] = 1
    }
  };
#ifndef NO_DRIFT
  if :: rate[0] = 0 :: rate[0] = 1 :: rate[0] = 2 fi;
  if :: rate[1] = 0 :: rate[1] = 1 :: rate[1] = 2 fi;
#if N == 3
  if :: rate[2] = 0 :: rate[2] = 1 :: rate[2] = 2 fi;
#endif
#endif
end:
  do
  :: d_step { (!ovf && TK_OK) -> TK_USE; tick(); check() }
  ARESTS
  AGENT(0)
  AGENT(1)
  HSTART(0, 1)
  HSTART(1, 0)
  ACKS(0, 1)
  ACKS(1, 0)
#if N == 2
  ROUND2(0, 1)
  ROUND2(1, 0)
#else
  AGENT(2)
  HSTART(0, 2)
  HSTART(1, 2)
  HSTART(2, 0)
  HSTART(2, 1)
  ACKS(2, 0)
  FORGES(0, 2)
  FORGES(1, 2)
  FORGES(2, 1)
  ROUND3(0, 1, 2)
  ROUND3(1, 0, 2)
  ROUND3(2, 0, 1)
#endif
  od
}
