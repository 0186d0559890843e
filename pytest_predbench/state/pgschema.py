"""The PostgreSQL schema of a shared run's books, and the guarantees it keeps by itself.

The client checks every rule before it writes (run/books.py, state/pgstore.py); the schema keeps
the ones that must never break even when a client is wrong, old or hand-driven:

- a cap is a constraint: a step that reserves more never leaves an account's `spent + reserved`
  above its cap (the same DOLLAR_EPSILON of slack the client allows), so no reservation can cross
  it. A settle is not bound by it: it books the real spend, which a session whose last call cost more
  than its worst case may take past its reservation; refusing it lost the session's record (the
  reservation was later reaped as lost at its reservation) where a run directory booked it, so the
  stores disagreed. Once past a cap, the account has no room: nothing more is reserved from it. The cap is read from
  the run's plan (its budget, or its last raise: `Plan.caps`), the one place caps are kept; an
  account holds no copy of it;
- an item holds at most one open reservation (the reservation is the claim on the item), and a
  reservation is settled at most once (one charge per reservation);
- one record per item is the primary key, and a terminal record is final: a trigger refuses to
  change or delete it, but for the one change a raise of the caps makes (an item skipped for budget
  reopened as infra, to run again: it spends nothing by itself, the caps still bind);
- money is `numeric`: exact decimal sums, never float rounding.

Tables live in their own schema, `predbench`, so a database can hold them beside anything else;
`schema_version` says which layout they have; the first run created in a database creates them.
"""

from pytest_predbench.session.reductions import MAX_SNAPSHOT_BYTES

SCHEMA_VERSION = 3
"""2: the accounts hold no cap (the plan's are checked by a trigger); 3: the trigger binds the steps
that reserve, not a settle's real spend, and the instances table."""
CAP_SLACK = "0.000000001"
"""DOLLAR_EPSILON (state/plan.py) as SQL: float sums of dollars may differ from exact ones by far less."""

INSTANCES_DDL = f"""CREATE TABLE predbench.instances (
    run_id text NOT NULL REFERENCES predbench.runs ON DELETE CASCADE,
    sha256 text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{{64}}$'),
    content bytea NOT NULL CHECK (octet_length(content) <= {MAX_SNAPSHOT_BYTES}),
    PRIMARY KEY (run_id, sha256)
);
"""
"""The instances the sessions' `pred reduce` calls reduced (session/reductions.py), by content address."""

WITHIN_CAP = f"""CREATE OR REPLACE FUNCTION predbench.within_cap() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    cap numeric;
BEGIN
    SELECT CASE WHEN NEW.name = '' THEN c.total ELSE c.per_model END INTO cap
        FROM predbench.caps_in_force(NEW.run_id) AS c;
    IF cap IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.reserved > OLD.reserved)
            AND NEW.spent + NEW.reserved > cap + {CAP_SLACK} THEN
        RAISE EXCEPTION 'within_cap: account "%" would hold % spent and reserved, past its cap %',
            NEW.name, NEW.spent + NEW.reserved, cap USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""
"""The cap rule on an account: a step that reserves more may not take it past its cap."""

DDL = f"""
CREATE SCHEMA IF NOT EXISTS predbench;

CREATE TABLE predbench.runs (
    id text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{{0,99}}$'),
    digest text NOT NULL,
    plan text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE predbench.accounts (
    run_id text NOT NULL REFERENCES predbench.runs ON DELETE CASCADE,
    name text NOT NULL,
    spent numeric NOT NULL DEFAULT 0 CHECK (spent >= 0),
    infra numeric NOT NULL DEFAULT 0 CHECK (infra >= 0 AND infra <= spent),
    reserved numeric NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    closed boolean NOT NULL DEFAULT false,
    streak_invocation text,
    streak_failures integer,
    streak_last_at timestamptz,
    PRIMARY KEY (run_id, name)
);

CREATE FUNCTION predbench.caps_in_force(run text, OUT total numeric, OUT per_model numeric)
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(p -> 'raises' -> -1 ->> 'total', p -> 'budget' ->> 'total')::numeric,
           coalesce(p -> 'raises' -> -1 ->> 'per_model', p -> 'budget' ->> 'per_model')::numeric
    FROM (SELECT plan::jsonb -> 'plan' AS p FROM predbench.runs WHERE id = run) AS recorded
$$;
COMMENT ON FUNCTION predbench.caps_in_force IS 'Plan.caps: the planned budget, or its last raise';

{WITHIN_CAP}CREATE TRIGGER within_cap BEFORE INSERT OR UPDATE ON predbench.accounts
    FOR EACH ROW EXECUTE FUNCTION predbench.within_cap();
COMMENT ON COLUMN predbench.accounts.name IS 'a model of the plan, or the empty string for the whole run';

CREATE TABLE predbench.reservations (
    run_id text NOT NULL,
    id text NOT NULL,
    item text NOT NULL,
    model text NOT NULL,
    dollars numeric NOT NULL CHECK (dollars >= 0),
    host text NOT NULL,
    boot_id text,
    pid integer NOT NULL,
    start_ticks bigint,
    at timestamptz NOT NULL DEFAULT now(),
    lease_until timestamptz NOT NULL,
    PRIMARY KEY (run_id, id),
    UNIQUE (run_id, item),
    FOREIGN KEY (run_id, model) REFERENCES predbench.accounts (run_id, name)
);
CREATE INDEX reservations_lease ON predbench.reservations (run_id, lease_until);

CREATE TABLE predbench.charges (
    run_id text NOT NULL REFERENCES predbench.runs ON DELETE CASCADE,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    item text NOT NULL,
    model text NOT NULL,
    dollars numeric NOT NULL CHECK (dollars >= 0),
    reserved numeric NOT NULL CHECK (reserved >= 0),
    kind text NOT NULL CHECK (kind IN ('result', 'infra', 'lost')),
    reservation text NOT NULL,
    reserved_at timestamptz NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, reservation),
    FOREIGN KEY (run_id, model) REFERENCES predbench.accounts (run_id, name)
);
CREATE INDEX charges_item ON predbench.charges (run_id, item);

CREATE TABLE predbench.records (
    run_id text NOT NULL REFERENCES predbench.runs ON DELETE CASCADE,
    item text NOT NULL,
    status text NOT NULL,
    terminal boolean NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (run_id, item)
);

CREATE FUNCTION predbench.refuse_terminal_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = 'skipped_budget' AND NEW.status = 'infra' AND NOT NEW.terminal THEN
        RETURN NEW;  -- a raise of the caps reopens an item skipped for budget (run/topup.py)
    END IF;
    RAISE EXCEPTION 'item % already has a terminal record (%); it is final', OLD.item, OLD.status
        USING ERRCODE = 'integrity_constraint_violation';
END $$;
CREATE TRIGGER terminal_is_final BEFORE UPDATE OR DELETE ON predbench.records
    FOR EACH ROW WHEN (OLD.terminal) EXECUTE FUNCTION predbench.refuse_terminal_change();

CREATE TABLE predbench.trajectories (
    run_id text NOT NULL REFERENCES predbench.runs ON DELETE CASCADE,
    item text NOT NULL,
    content bytea NOT NULL,
    PRIMARY KEY (run_id, item)
);

{INSTANCES_DDL}
CREATE TABLE predbench.preflight (
    run_id text NOT NULL REFERENCES predbench.runs ON DELETE CASCADE,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    entry text NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE predbench.schema_version (version integer NOT NULL);
INSERT INTO predbench.schema_version VALUES ({SCHEMA_VERSION});
"""
"""Run once per database, under LOCK_KEY, when predbench.schema_version does not exist yet."""

UPGRADES = {
    2: WITHIN_CAP
    + INSTANCES_DDL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
    + "UPDATE predbench.schema_version SET version = 3 WHERE version = 2;\n",
}
"""From a layout to the next, under LOCK_KEY: each only adds what the next one has."""

LOCK_KEY = 0x70726564  # 'pred': serialises concurrent creations of the schema
