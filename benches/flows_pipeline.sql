-- The bronze -> three silver tables pipeline of `scripts/bench flows` (read by benches/src/flows.rs
-- and benches/run.py; benches/peers/duckdb_flows.py runs the same queries as pulls).
CREATE STREAMING TABLE bronze (id bigint, topic text, key text, payload text)
PUSH INTO silver_orders AS
  SELECT id, key AS order_id, payload->>'customer' AS customer, CAST(payload->>'amount' AS DOUBLE) AS amount
  FROM bronze WHERE topic = 'orders'
PUSH INTO silver_payments AS
  SELECT id, key AS payment_id, CAST(payload->>'paid' AS DOUBLE) AS paid FROM bronze WHERE topic = 'payments'
PUSH INTO silver_clicks AS
  SELECT id, key AS click_id, payload->>'page' AS page FROM bronze WHERE topic = 'clicks'
