// A paid write the old primary took and no replica had, then a failover: the write must be made
// again on the new primary, not taken as stored. This is the Sentinel failover test's hang of
// stops 73-74 (a plate's settle lost with the old primary while its job's completion reached the
// new one, so the batch never finished and the paid result was gone), made certain: the replica
// replicates through a proxy the test blackholes, so the primary acknowledges the settle and the
// replica never gets it; then SENTINEL FAILOVER promotes that replica. Before that, a replica
// frozen for a moment (SIGSTOP): the settle made again finds its own outcome, and its first
// answer stands (a batch's finish is told once) with its counts moved once. And first, a
// reconnect between a write and its WAIT: the WAIT answers for the new connection, not the write.
import type { Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlateJobData } from '../../src/queue/types.js';
import { connectRedis, type RedisClient } from '../../src/redis/connection.js';
import { ReplicaAck } from '../../src/redis/replica-ack.js';
import { queueServicesOn } from '../../src/services.js';
import { Recorder, storesOf } from '../../workers/recorder.js';
import { testConfig } from '../helpers/config.js';
import { direct, startSentinels, type TestSentinels } from '../helpers/redis-topology.js';

let topology: TestSentinels;
let redis: RedisClient | undefined;

beforeAll(async () => {
  topology = await startSentinels('vqbacks', { replicationProxy: true });
}, 60_000);

afterAll(async () => {
  redis?.disconnect();
  await topology?.close();
});

function plateJob(plate: string): { job: Job<PlateJobData, unknown, string>; data: PlateJobData } {
  const data: PlateJobData = {
    account: 'default',
    batchId: 'acks',
    cls: 'normal',
    plate,
    product: 'agregados',
    step: 'poll',
    queryId: `q-${plate}`,
    polls: 1,
    requests: 2,
  };
  // What the recorder reads of a BullMQ job: its id, when it was added, the attempts it made.
  const job = { id: `job-${plate}`, timestamp: Date.now(), attemptsMade: 0, data } as unknown as Job<
    PlateJobData,
    unknown,
    string
  >;
  return { job, data };
}

describe('paid writes confirmed by a replica (VQ_REDIS_REPLICA_ACKS)', () => {
  it('a write then a reconnect before its WAIT is not taken as held: WAIT speaks for its own connection', async () => {
    // ioredis re-sends what was unanswered after a reconnect, and Sentinel's failover detector
    // reconnects on +switch-master: a WAIT on the fresh connection answers for writes it never
    // made. Without the connection's life (ReplicaAck#mark), the write below counted as held.
    const config = testConfig('{vqb-acks}', {
      VQ_REDIS_MODE: 'sentinel',
      REDIS_SENTINELS: topology.list,
      REDIS_SENTINEL_NAME: topology.name,
    });
    const conn = connectRedis(config.redis, { name: 'vqb-test-acks-life' });
    try {
      const ack = new ReplicaAck(conn, 1, 500);
      const key = '{vqb-acks}:life';
      // Sent before the connection is ready: it goes out in the connection's first life, and that
      // life's WAIT confirms it.
      expect(conn.status).not.toBe('ready');
      const held = ack.mark();
      await conn.set(key, '1');
      await ack.confirm(held);

      const mark = ack.mark();
      await conn.set(key, '2');
      const ready = new Promise((r) => conn.once('ready', r));
      conn.disconnect(true);
      await ready;
      // WAIT alone vouches for it: the new connection wrote nothing a replica lacks.
      expect(await conn.wait(1, 500)).toBe(1);
      await expect(ack.confirm(mark)).rejects.toMatchObject({ code: 'REDIS_UNREPLICATED' });
      // Made again in this life, it is confirmed.
      const again = ack.mark();
      await conn.set(key, '2');
      await expect(ack.confirm(again)).resolves.toBeUndefined();
    } finally {
      conn.disconnect();
    }
  }, 30_000);

  it('a settle a frozen replica lacks is made again and counted once; one only the old primary took is made again on the new one', async () => {
    const config = testConfig('{vqb-acks}', {
      VQ_REDIS_MODE: 'sentinel',
      REDIS_SENTINELS: topology.list,
      REDIS_SENTINEL_NAME: topology.name,
    });
    expect(config.redis.replicaAcks).toBe(1);
    redis = connectRedis(config.redis, { name: 'vqb-test-acks' });
    const services = queueServicesOn(config, redis);
    const recorder = new Recorder({
      ...storesOf(services),
      replicas: new ReplicaAck(redis, config.redis.replicaAcks, 200),
      storeBackoffMs: { first: 50, max: 400 },
    });
    const batch = { id: 'acks', account: 'default' };
    const outcomes = services.keys.outcomes(batch);

    // Replicated: confirmed at once.
    const first = plateJob('ABC1D23');
    expect(await recorder.record(first.job, first.data, undefined, { ok: 1 })).not.toBe('exists');

    // A replica late, not gone (frozen: the stream waits in its socket): the settle is made again
    // until it holds it, finds its own outcome there, and the first answer stands, counted once.
    topology.signalReplica('SIGSTOP');
    const late = plateJob('LAT3E21');
    let lateStored: string | undefined;
    const lateSettling = recorder.record(late.job, late.data, undefined, { ok: 3 }).then((r) => {
      lateStored = r;
      return r;
    });
    await new Promise((r) => setTimeout(r, 700));
    expect(lateStored).toBeUndefined();
    topology.signalReplica('SIGCONT');
    expect(await lateSettling).not.toBe('exists');
    expect(Number(await redis.hget(services.keys.batch(batch), 'done'))).toBe(2);

    // The link to the replica goes silent: the primary takes the next settle, no replica has it.
    topology.replication!.set('blackhole');
    const second = plateJob('XYZ9A87');
    let stored: string | undefined;
    const settling = recorder.record(second.job, second.data, undefined, { ok: 2 }).then((r) => {
      stored = r;
      return r;
    });
    const old = direct(topology.primary.port);
    try {
      for (let i = 0; i < 100 && !(await old.hexists(outcomes, 'XYZ9A87')); i++)
        await new Promise((r) => setTimeout(r, 20));
      expect(await old.hexists(outcomes, 'XYZ9A87')).toBe(1);
      // Taken by the primary, yet not stored as far as the recorder knows: no replica has it.
      await new Promise((r) => setTimeout(r, 600));
      expect(stored).toBeUndefined();

      expect(await topology.sentinels[0]!.redis.call('SENTINEL', 'FAILOVER', topology.name)).toBe('OK');
      for (let i = 0; i < 300 && (await topology.primaryPort()) !== topology.replica.port; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(await topology.primaryPort()).toBe(topology.replica.port);
      expect(await settling).not.toBe('exists');

      // The new primary holds both outcomes.
      const promoted = direct(topology.replica.port);
      try {
        expect(await promoted.hkeys(outcomes)).toEqual(expect.arrayContaining(['ABC1D23', 'LAT3E21', 'XYZ9A87']));
        expect(await services.outcomes.has(batch, 'XYZ9A87')).toBe(true);
      } finally {
        promoted.disconnect();
      }
    } finally {
      old.disconnect();
    }
  }, 60_000);
});
