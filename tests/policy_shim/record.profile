# libnfcoll profile v2
# segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route lag_cosine ef_decay
rec.body 2000 20 0.9000 0.9500 0.4000 0.3000 binary 0.1234 0.2500
rec.old 999 20 0.9000 0.9500 0.4000 0.3000 binary - -
