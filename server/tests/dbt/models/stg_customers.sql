{{ config(materialized='view') }}

select
    customer_id,
    name as customer_name,
    upper(country) as country_code
from {{ ref('customers') }}
