/**
 * @hq/protocol/schemas — the TypeBox schemas of the contract, for the routes that validate and
 * serialize its bodies (Fastify with `@fastify/type-provider-typebox`) and the readers that check
 * a file or an answer. Each schema is checked at compile time against the type of the package
 * root that it describes (`Same`), and built from the root's constants (hosts, outcomes,
 * reasons, tiers). A subpath of its own: loading it loads TypeBox, which the fence path must not.
 */
export * from './common.js';
export * from './lease.js';
export * from './agent.js';
export * from './registry.js';
export * from './replication.js';

import type { Static } from 'typebox';
import type * as P from '../index.js';
import type * as A from './agent.js';
import type { Assert, Same } from './common.js';
import type * as L from './lease.js';
import type * as R from './registry.js';
import type * as M from './replication.js';

/** Each schema is the contract's type (`Same`): neither can change without the other. */
// biome-ignore lint/correctness/noUnusedVariables: a compile-time check; declaring it is what makes tsc test it
type Checked = [
  Assert<Same<Static<typeof L.ViewOut>, P.View>>,
  Assert<Same<Static<typeof L.LeaseRecord>, P.LeaseRecord>>,
  Assert<Same<Static<typeof L.OkLease>, P.LeaseGranted>>,
  Assert<Same<Static<typeof L.Conflict>, P.LeaseConflict>>,
  Assert<Same<Static<typeof L.AcquireBody>, P.AcquireRequest>>,
  Assert<Same<Static<typeof L.RenewBody>, P.RenewRequest>>,
  Assert<Same<Static<typeof L.ReleaseBody>, P.ReleaseRequest>>,
  Assert<Same<Static<typeof L.ViewIn>, P.ViewReport>>,
  Assert<Same<Static<typeof L.ConfirmationIn>, P.ConfirmationReport>>,
  Assert<Same<Static<typeof L.PeerPathIn>, P.PeerPathReport>>,
  Assert<Same<Static<typeof L.HeartbeatBody>, P.HeartbeatRequest>>,
  Assert<Same<Static<typeof L.TimingProblemOut>, P.TimingProblem>>,
  Assert<Same<Static<typeof L.HeartbeatAnswer>, P.HeartbeatAnswer>>,
  Assert<Same<Static<typeof L.DisplacedOut>, P.DisplacedHolder>>,
  Assert<Same<Static<typeof L.LeaseWaitOut>, P.LeaseWait>>,
  Assert<Same<Static<typeof L.StepDownAckBody>, P.StepDownAck>>,
  Assert<Same<Static<typeof L.StepDownAckAnswer>, P.StepDownAckAnswer>>,
  Assert<Same<Static<typeof L.TransferBody>, P.TransferRequest>>,
  Assert<Same<Static<typeof L.MaintenanceBody>, P.MaintenanceRequest>>,
  Assert<Same<Static<typeof L.CheckAnswer>, P.CheckAnswer>>,
  Assert<Same<Static<typeof L.Health>, P.HealthAnswer<'arbiter'>>>,
  Assert<Same<Static<typeof L.Primary>, P.PrimaryAnswer>>,
  Assert<Same<Static<typeof L.EventsQuery>, P.EventsQuery>>,
  Assert<Same<Static<typeof L.EventStreamQuery>, Pick<P.EventsQuery, 'after'>>>,
  Assert<Same<Static<typeof L.EventOut>, P.EventRecord>>,
  Assert<Same<Static<typeof L.EventsAnswer>, P.EventsAnswer>>,
  Assert<Same<Static<typeof A.FenceQuery>, { role: string }>>,
  Assert<Same<Static<typeof A.ReportedEventBody>, P.ReportedEventBody>>,
  Assert<Same<Static<typeof A.OkAnswer>, P.OkAnswer>>,
  Assert<Same<Static<typeof A.ConfirmBody>, P.ConfirmRequest>>,
  Assert<Same<Static<typeof A.ConfirmAnswer>, P.ConfirmAnswer>>,
  Assert<Same<Static<typeof A.SteppedDownAnswer>, P.SteppedDownAnswer>>,
  Assert<Same<Static<typeof A.RunClaimBody>, P.RunClaim>>,
  Assert<Same<Static<typeof A.RunStartedBody>, P.RunStarted>>,
  Assert<Same<Static<typeof A.HeartbeatReport>, P.HeartbeatReport>>,
  Assert<Same<Static<typeof A.KnownLease>, P.KnownLease>>,
  Assert<Same<Static<typeof A.ReportedCadence>, P.ReportedCadence>>,
  Assert<Same<Static<typeof A.AgentStatus>, P.AgentStatus>>,
  Assert<Same<Static<typeof A.SeenAnswer>, P.SeenAnswer>>,
  Assert<Same<Static<typeof A.PeerInfo>, P.PeerInfo>>,
  Assert<Same<Static<typeof R.RegisterBody>, P.RegisterRequest>>,
  Assert<Same<Static<typeof R.ResourceHeartbeatBody>, P.ResourceHeartbeatRequest>>,
  Assert<Same<Static<typeof R.ResourcesQuery>, P.ResourcesQuery>>,
  Assert<Same<Static<typeof R.ResourceOut>, P.Resource>>,
  Assert<Same<Static<typeof R.ResourcesAnswer>, P.ResourcesAnswer>>,
  Assert<Same<Static<typeof R.Deleted>, P.ResourceDeleted>>,
  Assert<Same<Static<typeof R.PortLeaseBody>, P.PortLeaseRequest>>,
  Assert<Same<Static<typeof R.PortLeaseAnswer>, P.PortLeaseAnswer>>,
  Assert<Same<Static<typeof R.PortReleased>, P.PortReleased>>,
  Assert<Same<Static<typeof R.PortLeasesAnswer>, P.PortLeasesAnswer>>,
  Assert<Same<Static<typeof M.ManifestEntrySchema>, P.ManifestEntry>>,
  Assert<Same<Static<typeof M.ManifestSchema>, P.Manifest>>,
  Assert<Same<Static<typeof M.PushBody>, P.PushRequest>>,
  Assert<Same<Static<typeof M.SurvivalBlobStoredAnswer>, { stored: true; bytes: number }>>,
  Assert<Same<Static<typeof M.SurvivalCommittedAnswer>, { generation: string; files: number }>>,
  Assert<Same<Static<typeof M.PushBegun>, P.PushBegun>>,
  Assert<Same<Static<typeof M.ChunkReceived>, P.ChunkReceived>>,
  Assert<Same<Static<typeof M.PushCommitted>, P.PushCommitted>>,
  Assert<Same<Static<typeof M.OffsetHeaders>, { [P.OFFSET_HEADER]?: string }>>,
];
