// car_board_sitl.cpp - the SITL car's board inputs (car_board.h), in place of
// the sketch's car_board.cpp: the robot id from the command line, the `sim`
// telemetry member from the world's latest 'S' message, and the gyro as the
// real board reads it: through the sketch's MPU-6050 driver (imu_gyro.cpp),
// from the chip model on the simulated bus (i2c_bus.cpp; --imu 1).
#include <string.h>

#include "car_board.h"
#include "car_link.h"
#include "imu_gyro.h"
#include "sitl.h"

uint8_t car_robot_id()
{
    return (uint8_t)sitl::options().robot_id;
}

bool car_gyro_z(float *rad_s)
{
    return imu_gyro_z(car_uptime_us(), rad_s);
}

bool car_gyro_angle(uint64_t now_us, float *rad)
{
    return imu_gyro_angle(now_us, rad);
}

int car_telemetry_extra(char *buf, size_t cap)
{
    const sitl::Sensors s = sitl::sensors();
    if (s.sim.empty()) {
        return 0;
    }
    static const char KEY[] = "\"sim\":";
    const size_t len = sizeof KEY - 1 + s.sim.size();
    if (len + 1 > cap) {
        return -1;
    }
    memcpy(buf, KEY, sizeof KEY - 1);
    memcpy(buf + sizeof KEY - 1, s.sim.data(), s.sim.size());
    buf[len] = '\0';
    return (int)len;
}
