DROP FUNCTION IF EXISTS idemgen_release_claim(bigint);
DROP FUNCTION IF EXISTS idemgen_try_claim(bigint, bigint, text, text, text);
