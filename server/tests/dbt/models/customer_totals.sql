{{ config(materialized='table') }}

select
    c.customer_id,
    c.customer_name,
    count(o.order_id) as order_count,
    coalesce(sum(o.amount), 0) as total_amount
from {{ ref('stg_customers') }} as c
left join {{ ref('orders_incremental') }} as o
    on o.customer_id = c.customer_id
group by c.customer_id, c.customer_name
