{{ config(materialized='incremental', unique_key='order_id') }}

select
    order_id,
    customer_id,
    amount,
    ordered_at
from {{ ref('orders') }}
where order_id <= {{ var('max_order_id') }}
{% if is_incremental() %}
  -- the newest order already loaded is taken again, so the delete+insert replaces one row
  and order_id >= (select coalesce(max(order_id), 0) from {{ this }})
{% endif %}
